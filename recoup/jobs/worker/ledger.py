"""What the worker holds in memory: each claimed job's state from claim to written completion,
the counts its claims are sized by, and its statistics."""

from __future__ import annotations

import asyncio
import enum
import math
from collections import deque
from dataclasses import dataclass
from datetime import datetime

from recoup.jobs.model import Job
from recoup.jobs.targets import AttemptOutcome, AttemptResult


class HeldState(enum.Enum):
    """A held job's state. Only the `Ledger`'s transitions change it: claimed (`hold`),
    WAITING for its instant → its instant came, READY for a slot (`queue`) → RUNNING (`start`)
    → DONE, its attempt ended and its completion queued (`finish`); or REVOKED, taken back by
    the store or given up (`revoke`, `release_unstarted`) before it was DONE."""

    WAITING = "waiting"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"
    REVOKED = "revoked"


WAITING = HeldState.WAITING
READY = HeldState.READY
RUNNING = HeldState.RUNNING
DONE = HeldState.DONE
REVOKED = HeldState.REVOKED
UNSTARTED = frozenset({WAITING, READY})
LIVE = frozenset({WAITING, READY, RUNNING})

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
        self.state: HeldState = WAITING  # changed by the `Ledger`'s transitions only
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
    late_flow_starts: int = 0  # rate-limited jobs handed back for a new slot (too late)
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
    or waiting to start (one event per session); `stopping` once a stop was asked for.

    A held job's state changes through the transitions below only (`hold`, `queue`, `start`,
    `finish`, `revoke`, `release_unstarted`), each keeping the counts with it."""

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
        return [h for h in self.held.values() if h.state in LIVE]

    # -- transitions -------------------------------------------------------------------------

    def hold(self, job: Job) -> Held:
        """A claimed job is held, WAITING for its instant. Claimed again while an older
        attempt of it is not DONE, the store took that one back (our lease lapsed during a
        stall and it was rescued): it is revoked first."""
        old = self.held.get(job.id)
        if old is not None and old.state is not DONE:
            self.revoke(old)
        held = Held(job)
        self.held[job.id] = held
        self.unstarted += 1
        return held

    def queue(self, held: Held) -> None:
        """WAITING → READY: its instant came and no slot is free; it waits in `ready`."""
        held.state = READY
        self.ready.append(held)

    def start(self, held: Held) -> None:
        """WAITING or READY → RUNNING: it takes a slot."""
        held.state = RUNNING
        self.unstarted -= 1
        self.running += 1
        self.stats.started += 1

    def finish(self, held: Held) -> bool:
        """RUNNING or REVOKED → DONE: its attempt ended and frees its slot (`revoked` says
        whether the store had taken it back). False, changing nothing, when it had already
        finished or never started."""
        state = held.state
        if state is not RUNNING and state is not REVOKED:
            return False
        held.revoked = state is REVOKED
        held.state = DONE
        self.running -= 1
        self.freed += 1
        return True

    def release_unstarted(self) -> list[Held]:
        """Every WAITING or READY job → REVOKED and no longer held (the worker stops: they are
        handed back to the store unstarted). Returns them."""
        unstarted = [h for h in self.held.values() if h.state in UNSTARTED]
        self.ready.clear()
        for held in unstarted:
            held.state = REVOKED
            self.forget(held)
        self.unstarted = 0
        return unstarted

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
        if held.state in UNSTARTED:
            held.state = REVOKED
            self.unstarted -= 1
            self.forget(held)
            self.check_idle()
        elif held.state is RUNNING:
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
    "LIVE",
    "READY",
    "REVOKED",
    "RUNNING",
    "UNSTARTED",
    "WAITING",
    "Held",
    "HeldState",
    "Ledger",
    "WorkerStats",
]
