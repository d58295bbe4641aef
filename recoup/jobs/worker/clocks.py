"""The worker's two kinds of time: due time (maybe virtual) and elapsed time (real by default),
never mixed (ARCHITECTURE.md, 'Time in the worker').

- **Due time** is the injected `Clock`: what is due, a job's `run_at`, claims, backoff instants,
  the `now` of every store call (lease expiry included: on a virtual clock the store compares
  it with the `now` of whoever rescues; on a wall clock the store's own clock decides, below).
  A `VirtualClock` jumps when told; the worker never waits on it.
- **Elapsed time** is an `Elapsed`: monotonic seconds and timers on them. Everything the worker
  waits for is elapsed time: heartbeats and the lease watchdog, attempt timeouts on consumers,
  maintenance intervals, idle sleeps, the flusher's pauses, the shutdown grace, and the timer
  that fires a job at its instant (armed for the due-time distance, then checked against the
  due clock, so a job never starts before its instant). `RealElapsed` is the event loop's own
  clock; a test passes one it steps by hand.
- **Wall time** (`wall`) stamps outbound signatures: receivers compare it with their real clock.

A due clock that reads wall time (`reads_wall_time`: the system clock, not a virtual one) is
set on the store's clock (ARCHITECTURE.md, 'Clock skew'): the worker reads it through an
`OffsetClock` whose offset `align` measures (erring early) against `JobStore.read_clock` as
its session opens and every `ALIGN_EVERY` seconds after, so that a machine whose clock is
minutes off fires what it holds at the database's instants; and its claims, heartbeats and
rescues ask the store to decide by its own clock (`ClaimParams.store_clock`), whatever the
measurement.

HTTP deadlines and those of handlers run in a thread are enforced inside `recoup.jobs.targets`
by the event loop's clock (`asyncio.timeout`): real time in every case.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from recoup.timekeeping.clock import Clock, OffsetClock, SystemClock, reads_wall_time

ALIGN_EVERY = 10.0  # seconds of elapsed time between two measurements of the clock's skew
ALIGN_SAMPLES = 3  # round trips to the store per measurement (the shortest bounds the error)


class Timer(Protocol):
    """A timer armed by `Elapsed.call_later` (an `asyncio.TimerHandle` is one)."""

    def cancel(self) -> None: ...


class Elapsed(Protocol):
    """Elapsed time: monotonic seconds (any origin), and timers that run a callback on the
    worker's event loop once that many seconds have passed. Called from the loop's thread (and
    `monotonic` from the notification listener's)."""

    def monotonic(self) -> float: ...

    def call_later(self, seconds: float, callback: Callable[[], object]) -> Timer: ...


class RealElapsed:
    """The event loop's clock (`time.monotonic`): the default, and production's."""

    def monotonic(self) -> float:
        return time.monotonic()

    def call_later(self, seconds: float, callback: Callable[[], object]) -> Timer:
        return asyncio.get_running_loop().call_later(seconds, callback)


def _system_wall() -> datetime:
    return SystemClock().now()


@dataclass(frozen=True)
class WorkerClock:
    """Every time the worker reads: `due` (what is due, maybe virtual), `elapsed` (how long
    things take, real unless a test steps it) and `wall` (signature timestamps, real).
    `aligned` is `due` when it reads wall time, set on the store's clock by `align`; None on
    a virtual clock (`on`)."""

    due: Clock = field(default_factory=SystemClock)
    elapsed: Elapsed = field(default_factory=RealElapsed)
    wall: Callable[[], datetime] = _system_wall
    aligned: OffsetClock | None = None

    @classmethod
    def on(cls, clock: Clock, *, elapsed: Elapsed, wall: Callable[[], datetime]) -> WorkerClock:
        """The worker's times with `clock` as its due clock: read through an `OffsetClock`
        that `align` sets on the store's when it reads wall time, as is when virtual."""
        if not reads_wall_time(clock):
            return cls(due=clock, elapsed=elapsed, wall=wall)
        aligned = OffsetClock(clock)
        return cls(due=aligned, elapsed=elapsed, wall=wall, aligned=aligned)

    @property
    def on_store_clock(self) -> bool:
        """Whether the store decides claims, leases and rescues by its own clock."""
        return self.aligned is not None


def align(clock: OffsetClock, read_store_clock: Callable[[], datetime]) -> timedelta:
    """Set `clock.offset` to how far the store's clock is ahead of `clock.base`, erring early.
    The store read its clock before our reading that follows its answer, so the true offset is
    at least the store's reading minus ours; over `ALIGN_SAMPLES` round trips the greatest of
    these bounds is the one set, at most the shortest round trip below the truth. The due clock
    so never reads ahead of the database's time (nothing fires before its instant by the
    database's clock) and lags it by less than a round trip. Returns the offset. Called in a
    store thread, so that nothing but the round trips lies between the readings."""
    lower: timedelta | None = None
    for _ in range(ALIGN_SAMPLES):
        store_now = read_store_clock()
        bound = store_now - clock.base.now()
        if lower is None or bound > lower:
            lower = bound
    assert lower is not None
    clock.offset = lower
    return lower


async def sleep(elapsed: Elapsed, seconds: float) -> None:
    """Wait `seconds` of elapsed time."""
    done = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    timer = elapsed.call_later(seconds, wake)
    try:
        await done
    finally:
        timer.cancel()


async def wait_tasks(
    elapsed: Elapsed, tasks: Collection[asyncio.Task[None]], seconds: float
) -> set[asyncio.Task[None]]:
    """Wait until every task is done or `seconds` of elapsed time have passed; return the
    tasks still pending."""
    pending = {task for task in tasks if not task.done()}
    if not pending:
        return pending
    deadline = asyncio.get_running_loop().create_future()

    def expire() -> None:
        if not deadline.done():
            deadline.set_result(None)

    timer = elapsed.call_later(seconds, expire)
    try:
        while pending and not deadline.done():
            await asyncio.wait({*pending, deadline}, return_when=asyncio.FIRST_COMPLETED)
            pending = {task for task in pending if not task.done()}
    finally:
        timer.cancel()
        if not deadline.done():
            deadline.cancel()
    return pending


__all__ = [
    "ALIGN_EVERY",
    "ALIGN_SAMPLES",
    "Elapsed",
    "RealElapsed",
    "Timer",
    "WorkerClock",
    "align",
    "sleep",
    "wait_tasks",
]
