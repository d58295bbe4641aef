"""Test clocks: a whole server on a virtual clock that moves only when told, like Stripe's.

`TestClock.advance_to(t)` moves the clock from one due instant to the next up to `t`,
running at each instant every job due then (and whatever they schedule that falls before
`t`), so two weeks of retries run in seconds, in due order, as if that time had passed. Only
due time is virtual: leases, heartbeats and HTTP timeouts stay in elapsed (real) time (the
worker's own business: ARCHITECTURE.md, 'Time in the worker'), so a jump of three days expires no
lease. One advance runs in one worker session, however many instants it visits.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from recoup.errors import InvalidInput
from recoup.jobs.store import JobStore, ScheduleStore
from recoup.jobs.worker import Worker
from recoup.timekeeping.clock import VirtualClock
from recoup.timekeeping.instants import require_aware

MAX_STEPS = 1_000_000  # due instants visited by one advance: a bound, not a limit in practice


class TestClock:
    """Drives `worker` (built on `clock`) through virtual time. `before_step` runs before
    each drain (e.g. the dunning runtime's resync). One advance at a time."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(
        self,
        clock: VirtualClock,
        worker: Worker,
        store: JobStore,
        *,
        schedules: ScheduleStore | None = None,
        before_step: Callable[[], object] | None = None,
    ) -> None:
        self.clock = clock
        self.worker = worker
        self.store = store
        self.schedules = schedules
        self.before_step = before_step
        self._lock = threading.Lock()

    def now(self) -> datetime:
        return self.clock.now()

    def advance(self, delta: timedelta) -> int:
        if delta < timedelta(0):
            raise InvalidInput("advance_seconds", delta.total_seconds(), "expected ≥ 0")
        return self.advance_to(self.clock.now() + delta)

    def advance_to(self, target: datetime) -> int:
        """Run everything due up to `target`, in due order; return the attempts run. A target
        before now → `InvalidInput` (a clock never goes back)."""
        require_aware("to", target)
        with self._lock:
            if target < self.clock.now():
                raise InvalidInput(
                    "to", target.isoformat(), f"expected ≥ the clock's now ({self.clock.now()})"
                )
            return asyncio.run(self._advance_to(target))

    async def _advance_to(self, target: datetime) -> int:
        """Every step in one worker session: a step costs its store calls, not a session."""
        async with self.worker.session():
            ran = 0
            for _ in range(MAX_STEPS):
                ran += await self._step()
                step = await asyncio.to_thread(self._next_due, target)
                if step is None or step > target:
                    break
                if step > self.clock.now():
                    self.clock.set(step)
            self.clock.set(target)
            ran += await self._step()
            return ran

    async def _step(self) -> int:
        """`before_step` (in a thread: it may block, or run an event loop of its own), then
        every job due now."""
        if self.before_step is not None:
            await asyncio.to_thread(self.before_step)
        return await self.worker.run_until_idle()

    def _next_due(self, target: datetime) -> datetime | None:
        """The earliest due job, or schedule occurrence not yet materialised, before
        `target` (a step never skips an occurrence, which would then count as missed)."""
        nxt = self.store.next_due_at()
        if self.schedules is not None:
            now = self.clock.now()
            due = self.schedules.due_schedules(
                now=now, horizon=max(target - now, timedelta(0)), limit=1000
            )
            fires = [s.next_fire_at for s in due if s.next_fire_at is not None]
            if fires and (nxt is None or min(fires) < nxt):
                nxt = min(fires)
        return nxt


__all__ = ["TestClock"]
