"""Test clocks: a whole server on a virtual clock that moves only when told, like Stripe's.

`TestClock.advance_to(t)` runs every job due up to `t` (and whatever they schedule that falls
before `t`) as if that time had passed, so two weeks of retries run in seconds. It moves in
batches (`Worker.run_batch`): each claims the earliest due jobs, at most one per job group,
moves the clock to the latest of their instants and runs them together, each at its own
instant (the clock is pinned there inside the attempt: what it reads, the run's start and end,
a retry's backoff), as a worker runs jobs whose instants come while earlier ones still run.
A group's jobs (one invoice's attempts, deadline and events) run one after another in due
order; a job that a batch schedules before the clock's new now runs in the next batch, at its
own instant. A batch never passes a schedule's next occurrence. Only due time is virtual:
leases, heartbeats and HTTP timeouts stay in elapsed (real) time (the worker's own business:
ARCHITECTURE.md, 'Time in the worker'), so a jump of three days expires no lease. One advance
runs in one worker session, however many batches it takes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from recoup.errors import InvalidInput
from recoup.jobs.store import JobStore, ScheduleStore
from recoup.jobs.worker import Worker
from recoup.timekeeping.clock import VirtualClock
from recoup.timekeeping.instants import require_aware

MAX_STEPS = 1_000_000  # batches run by one advance: a bound, not a limit in practice


class TestClock:
    """Drives `worker` (built on `clock`) through virtual time. `before_step` runs before
    each batch (e.g. the dunning runtime's resync). One advance at a time.

    `handler_threads` sizes the thread pool that runs the handlers' blocking calls
    (`asyncio.to_thread`, the default executor of the loop each advance runs on); None keeps
    asyncio's default (up to 6 threads on 2 cores). On SQLite one thread is quicker: the calls'
    writes queue for one lock anyway, and threads running them side by side only hand the GIL
    back and forth at every statement (the demo: 34 s against 25-28 s at size 1000, with a
    quarter of the context switches)."""

    __test__ = False  # not a pytest test class, despite its name

    def __init__(
        self,
        clock: VirtualClock,
        worker: Worker,
        store: JobStore,
        *,
        schedules: ScheduleStore | None = None,
        before_step: Callable[[], object] | None = None,
        handler_threads: int | None = None,
    ) -> None:
        if handler_threads is not None and handler_threads < 1:
            raise InvalidInput("handler_threads", handler_threads, "expected ≥ 1, or None")
        self.clock = clock
        self.worker = worker
        self.store = store
        self.schedules = schedules
        self.before_step = before_step
        self.handler_threads = handler_threads
        self._lock = threading.Lock()

    def now(self) -> datetime:
        return self.clock.now()

    def advance(self, delta: timedelta) -> int:
        if delta < timedelta(0):
            raise InvalidInput("advance_seconds", delta.total_seconds(), "expected ≥ 0")
        return self.advance_to(self.clock.now() + delta)

    def advance_to(
        self, target: datetime, *, on_batch: Callable[[int], object] | None = None
    ) -> int:
        """Run everything due up to `target`, in due order; return the attempts run. A target
        before now → `InvalidInput` (a clock never goes back). `on_batch(ran)` follows the
        progress: called on the worker's event loop after each batch (it must be quick), with
        the attempts run so far; the clock's now is where the batch moved it."""
        require_aware("to", target)
        with self._lock:
            if target < self.clock.now():
                raise InvalidInput(
                    "to", target.isoformat(), f"expected ≥ the clock's now ({self.clock.now()})"
                )
            with asyncio.Runner() as runner:
                if self.handler_threads is not None:
                    pool = ThreadPoolExecutor(self.handler_threads, "recoup-handlers")
                    runner.get_loop().set_default_executor(pool)  # shut down as the runner closes
                return runner.run(self._advance_to(target, on_batch))

    async def _advance_to(self, target: datetime, on_batch: Callable[[int], object] | None) -> int:
        """Batches until none is due by `target`, then `target` itself, in one session."""
        async with self.worker.session():
            ran = 0
            for _ in range(MAX_STEPS):
                await self._before_step()
                bound = await asyncio.to_thread(self._next_occurrence, target)
                batch = await self.worker.run_batch(bound, move=self._move, pin=self.clock.pinned)
                ran += batch
                if batch == 0:
                    if bound >= target:
                        break
                    self._move(bound)  # the occurrence materialises in the next batch
                elif on_batch is not None:
                    on_batch(ran)
            self.clock.set(target)
            await self._before_step()
            return ran + await self.worker.run_until_idle()

    async def _before_step(self) -> None:
        """`before_step`, in a thread: it may block, or run an event loop of its own."""
        if self.before_step is not None:
            await asyncio.to_thread(self.before_step)

    def _move(self, instant: datetime) -> None:
        if instant > self.clock.now():
            self.clock.set(instant)

    def _next_occurrence(self, target: datetime) -> datetime:
        """The earliest schedule occurrence not yet materialised before `target`, else
        `target`: a batch never passes one (it would then count as missed)."""
        if self.schedules is None:
            return target
        now = self.clock.now()
        due = self.schedules.due_schedules(
            now=now, horizon=max(target - now, timedelta(0)), limit=1000
        )
        fires = [s.next_fire_at for s in due if s.next_fire_at is not None]
        return min([target, *fires])


__all__ = ["TestClock"]
