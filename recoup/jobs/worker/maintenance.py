"""Periodic maintenance: set the due clock on the store's (a wall clock only), hand back dead
workers' jobs, rescue expired leases (anyone's), materialise schedule occurrences, prune
finished jobs and old runs, each on its own interval of elapsed time."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from datetime import datetime

from recoup.jobs.schedules.occurrences import materialise
from recoup.jobs.store import JobStore, ScheduleStore
from recoup.jobs.worker.clocks import ALIGN_EVERY, Elapsed
from recoup.jobs.worker.config import WorkerConfig
from recoup.jobs.worker.ledger import WorkerStats
from recoup.jobs.worker.resources import StoreCall

log = logging.getLogger("recoup.worker")

PRUNE_LIMIT = 10_000  # rows deleted per prune call (each its own short transaction)
RESCUE_LIMIT = 1000  # expired leases rescued per call (each its own short transaction)
DEAD_LIMIT = 100  # dead workers handed back per call (each its own short transaction)


class Maintenance:
    """`rescue_dead`, `rescue`, `materialise` and `prune` take the due clock's `now` and loop
    while a call comes back full; `align` (None on a virtual clock) measures the due clock's
    skew against the store's clock every `ALIGN_EVERY` seconds, and `store_clock` has rescues
    decided by the store's clock (ARCHITECTURE.md, 'Clock skew'). `run_due()` runs each step
    whose interval has passed (the main loop calls it every turn): a step's next deadline
    advances before it runs, and a failing step is logged and tried again at its next turn,
    never keeping the loop from claiming.
    `schedules` is None when the worker does not materialise."""

    def __init__(
        self,
        *,
        store: JobStore,
        schedules: ScheduleStore | None,
        call: StoreCall,
        config: WorkerConfig,
        stats: WorkerStats,
        now: Callable[[], datetime],
        elapsed: Elapsed,
        wake: Callable[[], None],
        align: Callable[[], Awaitable[None]] | None = None,
        store_clock: bool = False,
    ) -> None:
        self._store = store
        self._schedules = schedules
        self._call = call
        self._config = config
        self._stats = stats
        self._now = now
        self._elapsed = elapsed
        # Called when there is new work to claim (occurrences became jobs, jobs handed back).
        self._wake = wake
        self._align = align
        self._store_clock = store_clock
        self.reset()

    def reset(self) -> None:
        """Every step is due (a worker starting)."""
        self._next_dead = self._next_rescue = -math.inf
        self._next_schedules = self._next_prune = -math.inf
        # The session's opening measured it (`Worker.session`): next after the interval.
        self._next_align = (
            self._elapsed.monotonic() + ALIGN_EVERY if self._align is not None else math.inf
        )

    def next_deadline(self) -> float:
        """The elapsed time at which the next step is due."""
        return min(
            self._next_align,
            self._next_dead,
            self._next_rescue,
            self._next_schedules,
            self._next_prune,
        )

    async def run_due(self) -> None:
        mono = self._elapsed.monotonic()
        if mono >= self._next_align and self._align is not None:
            self._next_align = mono + ALIGN_EVERY
            await self._step("measuring the clock's skew", lambda _now: self.align())
        if mono >= self._next_dead:
            self._next_dead = mono + self._config.dead_check_interval.total_seconds()
            await self._step("finding dead workers", self.rescue_dead)
        if mono >= self._next_rescue:
            self._next_rescue = mono + self._config.rescue_every
            await self._step("rescue", self.rescue)
        if mono >= self._next_schedules:
            if self._schedules is None:
                self._next_schedules = math.inf
            else:
                self._next_schedules = mono + self._config.schedule_interval.total_seconds()
                await self._step("materialise", self.materialise)
        if mono >= self._next_prune:
            if self._config.prune_interval is None:
                self._next_prune = math.inf
            else:
                self._next_prune = mono + self._config.prune_interval.total_seconds()
                await self._step("prune", self.prune)

    async def _step(self, what: str, step: Callable[[datetime], Awaitable[None]]) -> None:
        try:
            await step(self._now())
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("worker %s: %s failed; claiming goes on", self._config.worker_id, what)

    async def align(self) -> None:
        """Set the due clock on the store's (nothing on a virtual clock)."""
        if self._align is not None:
            await self._align()

    async def rescue_dead(self, now: datetime) -> None:
        """Hand back the jobs of workers whose sessions ended (ARCHITECTURE.md, 'Worker
        sessions'): seconds after a crash, where their leases would take their length."""
        while True:
            found = await self._call(
                self._store.rescue_dead_workers,
                now=now,
                rules=self._config.session_rules,
                limit=DEAD_LIMIT,
            )
            handed = 0
            for worker_id, jobs in found.items():
                handed += len(jobs)
                log.warning(
                    "worker %s: worker %s is gone (its session ended); handed back %d jobs",
                    self._config.worker_id,
                    worker_id,
                    len(jobs),
                )
            self._stats.dead_workers += len(found)
            self._stats.rescued += handed
            if handed:
                self._wake()
            if len(found) < DEAD_LIMIT:
                return

    async def rescue(self, now: datetime) -> None:
        while True:
            rescued = await self._call(
                self._store.rescue_expired,
                now=now,
                limit=RESCUE_LIMIT,
                store_clock=self._store_clock,
            )
            self._stats.rescued += len(rescued)
            if len(rescued) < RESCUE_LIMIT:
                return

    async def materialise(self, now: datetime) -> None:
        if self._schedules is None:
            return
        created = await self._call(
            materialise, self._schedules, now=now, horizon=self._config.schedule_horizon
        )
        self._stats.materialised += created
        if created:
            self._wake()

    async def prune(self, now: datetime) -> None:
        while True:
            result = await self._call(
                self._store.prune,
                now=now,
                keep_runs_for=self._config.keep_runs_for,
                limit=PRUNE_LIMIT,
            )
            self._stats.pruned_jobs += result.jobs
            self._stats.pruned_runs += result.runs
            if result.jobs < PRUNE_LIMIT and result.runs < PRUNE_LIMIT:
                return


__all__ = ["DEAD_LIMIT", "PRUNE_LIMIT", "RESCUE_LIMIT", "Maintenance"]
