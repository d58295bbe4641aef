"""The worker's tunables as one frozen, validated record (`WorkerConfig`)."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any

from recoup.errors import InvalidInput
from recoup.jobs.schedules.occurrences import SCHEDULE_HORIZON
from recoup.jobs.worker_records import SessionRules

DEFAULT_LEASE = timedelta(seconds=30)
DEFAULT_HORIZON = timedelta(milliseconds=500)  # claim this far ahead; fire from memory
DEFAULT_GRACE = timedelta(seconds=30)  # running attempts may finish this long after stop
MAX_SLEEP = 1.0  # seconds; the longest idle sleep without a notification
SCHEDULE_INTERVAL = timedelta(seconds=5)  # how often the materialiser runs
PRUNE_INTERVAL = timedelta(minutes=10)  # how often finished jobs past keep_for are deleted
KEEP_RUNS_FOR = timedelta(days=30)  # run-log retention (kept after their job is deleted)
LEASE_MARGIN = 0.2  # held jobs are given up when no heartbeat succeeded for 80 % of a lease
SESSION_BEAT = timedelta(seconds=0.5)  # how often a worker stamps its session's heartbeat
# PostgreSQL: a worker whose session lock is free is dead once its heartbeat is this old.
SESSION_GRACE = timedelta(seconds=2.5)
# A worker nothing shows alive or dead (SQLite, another PID namespace) is dead once its
# heartbeat is this old.
DEAD_AFTER = timedelta(seconds=5)
DEAD_CHECK_INTERVAL = timedelta(seconds=1)  # how often a worker looks for dead ones
# Seconds: a worker gives its jobs up this long before its session may be found dead.
SESSION_MARGIN = 1.0


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{random.getrandbits(24):06x}"


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """How a worker claims, runs, reports and maintains. Durations are elapsed (real) time
    except `horizon` and `schedule_horizon`, which are distances in due time.

    - `concurrency`: attempts running at once; `batch_size`: jobs per claim at most;
      `prefetch`: claimed jobs not started yet at most (None: 2 × `batch_size`, at least
      `concurrency`).
    - `lease`: how long a claim holds a job without a heartbeat; `heartbeat_interval` (None: a
      third of the lease) must stay well within it; `rescue_interval` (None: half the lease):
      how often expired leases (anyone's) are rescued.
    - `horizon`: how far ahead jobs are claimed, then fired from memory at their instant.
    - `flush_size` completions, or `flush_interval` seconds after the first, make a batch.
    - `schedules`: materialise schedule occurrences due within `schedule_horizon`, every
      `schedule_interval`. `prune_interval` (None: never): how often finished jobs past their
      `keep_for` and runs older than `keep_runs_for` are deleted.
    - `session_beat`: how often the worker stamps its session's heartbeat (ARCHITECTURE.md,
      'Worker sessions'); `session_grace` and `dead_after` (`SessionRules`): when another
      worker is dead, looked for every `dead_check_interval`. A worker gives up every job it
      holds when no beat succeeded for the rule of its backend minus `SESSION_MARGIN`, so
      every worker of a database should share these.
    - `grace`: how long running attempts may finish after a stop; `max_sleep` (seconds): the
      longest idle sleep without a notification; `store_threads`: the store call pool."""

    worker_id: str = field(default_factory=default_worker_id)
    concurrency: int = 100
    lease: timedelta = DEFAULT_LEASE
    horizon: timedelta = DEFAULT_HORIZON
    batch_size: int = 1000
    prefetch: int | None = None
    flush_size: int = 500
    flush_interval: float = 0.005  # seconds
    heartbeat_interval: timedelta | None = None
    rescue_interval: timedelta | None = None
    schedules: bool = True
    schedule_horizon: timedelta = SCHEDULE_HORIZON
    schedule_interval: timedelta = SCHEDULE_INTERVAL
    grace: timedelta = DEFAULT_GRACE
    prune_interval: timedelta | None = PRUNE_INTERVAL
    keep_runs_for: timedelta = KEEP_RUNS_FOR
    max_sleep: float = MAX_SLEEP
    store_threads: int = 4
    session_beat: timedelta = SESSION_BEAT
    session_grace: timedelta = SESSION_GRACE
    dead_after: timedelta = DEAD_AFTER
    dead_check_interval: timedelta = DEAD_CHECK_INTERVAL

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise InvalidInput("concurrency", self.concurrency, "expected ≥ 1")
        if self.batch_size < 1:
            raise InvalidInput("batch_size", self.batch_size, "expected ≥ 1")
        if self.lease <= timedelta(0):
            raise InvalidInput("lease", self.lease, "expected a positive duration")
        if self.heartbeat_interval is not None and self.heartbeat_interval >= self.lease * (
            1 - LEASE_MARGIN
        ):
            raise InvalidInput(
                "heartbeat_interval",
                self.heartbeat_interval,
                f"expected well within the lease (< {1 - LEASE_MARGIN:.0%} of {self.lease})",
            )
        for name in ("session_beat", "dead_check_interval"):
            if getattr(self, name) <= timedelta(0):
                raise InvalidInput(name, getattr(self, name), "expected a positive duration")
        # The worker gives its jobs up `SESSION_MARGIN` before either rule may apply: leave it
        # two beats at least to prove its session first.
        least = 2 * self.session_beat + timedelta(seconds=SESSION_MARGIN)
        if not least <= self.session_grace:
            raise InvalidInput(
                "session_grace",
                self.session_grace,
                f"expected ≥ 2 × session_beat + SESSION_MARGIN ({least}) and ≤ dead_after",
            )
        if not self.session_grace <= self.dead_after:
            raise InvalidInput(
                "dead_after", self.dead_after, f"expected ≥ session_grace ({self.session_grace})"
            )

    @property
    def unstarted_limit(self) -> int:
        """Claimed jobs not yet started (waiting for their instant or a slot), at most."""
        if self.prefetch is not None:
            return self.prefetch
        return max(2 * self.batch_size, self.concurrency)

    @property
    def heartbeat_every(self) -> float:
        """Seconds between heartbeats."""
        return (self.heartbeat_interval or self.lease / 3).total_seconds()

    @property
    def rescue_every(self) -> float:
        """Seconds between rescues of expired leases."""
        return (self.rescue_interval or self.lease / 2).total_seconds()

    @property
    def session_rules(self) -> SessionRules:
        return SessionRules(grace=self.session_grace, dead_after=self.dead_after)

    @property
    def lease_safe(self) -> float:
        """Seconds after the last heartbeat that succeeded began within which our leases
        surely hold (`lease × (1 − LEASE_MARGIN)`)."""
        return self.lease.total_seconds() * (1 - LEASE_MARGIN)


KNOBS = frozenset(f.name for f in fields(WorkerConfig))  # every tuning knob, by name


def worker_config(config: WorkerConfig | None, knobs: Mapping[str, Any]) -> WorkerConfig:
    """The configuration of a worker asked for with `config` or with knobs by name (for
    conveniences such as `Scheduler.worker(concurrency=4)`), not both: a knob given with
    `config` too is refused, naming it, rather than one of them silently ignored. A name that
    is not a `WorkerConfig` field is a TypeError, as for any unexpected keyword."""
    unknown = sorted(set(knobs) - KNOBS)
    if unknown:
        raise TypeError(f"unexpected worker option {unknown[0]!r} (not a WorkerConfig field)")
    if config is None:
        return WorkerConfig(**knobs)
    if knobs:
        name = sorted(knobs)[0]
        raise InvalidInput(name, knobs[name], "given with config= too: set it in config only")
    return config


__all__ = [
    "DEAD_AFTER",
    "DEAD_CHECK_INTERVAL",
    "DEFAULT_GRACE",
    "DEFAULT_HORIZON",
    "DEFAULT_LEASE",
    "KEEP_RUNS_FOR",
    "KNOBS",
    "LEASE_MARGIN",
    "MAX_SLEEP",
    "PRUNE_INTERVAL",
    "SCHEDULE_INTERVAL",
    "SESSION_BEAT",
    "SESSION_GRACE",
    "SESSION_MARGIN",
    "WorkerConfig",
    "default_worker_id",
    "worker_config",
]
