"""What the worker holds in memory: each claimed job's state from claim to written completion,
the counts its claims are sized by, and its statistics."""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass
from datetime import datetime

from recoup.jobs.model import Job
from recoup.jobs.targets import AttemptOutcome, AttemptResult

# A held job's states: claimed, waiting for its instant → its instant came, waiting for a slot
# → running → its attempt ended (completion queued); or taken back by the store (revoked).
WAITING, READY, RUNNING, DONE, REVOKED = range(5)

INTERRUPTED = AttemptResult(
    AttemptOutcome.RETRY, error="interrupted: the worker stopped, or no longer holds the job"
)


class Held:
    """A job this worker holds a lease on, from claim until its completion is written."""

    __slots__ = (
        "abandoned",
        "expires",
        "job",
        "revoked",
        "started_at",
        "state",
        "task",
        "timed_out",
    )

    def __init__(self, job: Job) -> None:
        self.job = job
        self.state = WAITING
        self.task: asyncio.Task[None] | None = None
        self.started_at: datetime | None = None
        # An attempt on a consumer: the elapsed time its timeout ends, and whether it did.
        self.expires = math.inf
        self.timed_out = False
        self.revoked = False  # the store took it back while it ran (not reported on_attempt)
        # Given up with the worker's session: its completion is never written (the job is
        # handed back as lost, its attempt not spent).
        self.abandoned = False


@dataclass
class WorkerStats:
    """Counters since the worker started (read them from the worker's thread)."""

    claimed: int = 0
    started: int = 0
    succeeded: int = 0
    retried: int = 0
    failed: int = 0
    released: int = 0
    revoked: int = 0  # held jobs the store took back (cancelled, or rescued after a stall)
    rescued: int = 0  # jobs this worker handed back (expired leases, dead workers' jobs)
    dead_workers: int = 0  # workers this worker found dead (their sessions ended)
    abandoned: int = 0  # held jobs given up when this worker's own session was lost
    pruned_jobs: int = 0
    pruned_runs: int = 0
    flushes: int = 0
    materialised: int = 0  # schedule occurrences turned into jobs
    claim_seconds: float = 0.0  # elapsed time spent in claim calls
    flush_seconds: float = 0.0  # elapsed time spent in complete_many calls


class Ledger:
    """The held jobs by id (the latest attempt of each), the ones whose instant came waiting
    for a slot (`ready`, FIFO), and the counts: `unstarted` (WAITING or READY), `running`, and
    `freed` (slots freed since the previous claim). `idle` is set whenever nothing is running
    or waiting to start (one event per session); `stopping` once a stop was asked for."""

    def __init__(self, stats: WorkerStats) -> None:
        self.stats = stats
        self.held: dict[str, Held] = {}
        self.ready: deque[Held] = deque()
        self.unstarted = 0
        self.running = 0
        self.freed = 0
        self.stopping = False
        self.idle: asyncio.Event | None = None

    def live(self) -> list[Held]:
        """The held jobs not finished yet (waiting, ready or running)."""
        return [h for h in self.held.values() if h.state in (WAITING, READY, RUNNING)]

    def forget(self, held: Held) -> None:
        """Stop holding this attempt (not a newer attempt of its job that replaced it)."""
        if self.held.get(held.job.id) is held:
            del self.held[held.job.id]

    def check_idle(self) -> None:
        if self.running == 0 and self.unstarted == 0 and self.idle is not None:
            self.idle.set()

    def revoke(self, held: Held) -> None:
        """The store says we no longer hold this job: do not start it, stop its attempt (its
        runner then reports it interrupted)."""
        self.stats.revoked += 1
        if held.state in (WAITING, READY):
            held.state = REVOKED
            self.unstarted -= 1
            self.forget(held)
            self.check_idle()
        elif held.state == RUNNING:
            held.state = REVOKED
            if held.task is not None:
                held.task.cancel()

    def abandon(self) -> int:
        """The worker's session is lost: give up every live held job the way `revoke` does,
        and never write their completions (whoever hands the jobs back logs the attempts as
        lost). Returns how many."""
        live = self.live()
        for held in live:
            held.abandoned = True
            self.revoke(held)
        self.stats.abandoned += len(live)
        return len(live)


__all__ = [
    "DONE",
    "INTERRUPTED",
    "READY",
    "REVOKED",
    "RUNNING",
    "WAITING",
    "Held",
    "Ledger",
    "WorkerStats",
]
