"""The worker's two kinds of time: due time (maybe virtual) and elapsed time (real by default),
never mixed (ARCHITECTURE.md, 'Time in the worker').

- **Due time** is the injected `Clock`: what is due, a job's `run_at`, claims, backoff instants,
  the `now` of every store call (lease expiry included: the store compares it with the `now` of
  whoever rescues). A `VirtualClock` jumps when told; the worker never waits on it.
- **Elapsed time** is an `Elapsed`: monotonic seconds and timers on them. Everything the worker
  waits for is elapsed time: heartbeats and the lease watchdog, attempt timeouts on consumers,
  maintenance intervals, idle sleeps, the flusher's pauses, the shutdown grace, and the timer
  that fires a job at its instant (armed for the due-time distance, then checked against the
  due clock, so a job never starts before its instant). `RealElapsed` is the event loop's own
  clock; a test passes one it steps by hand.
- **Wall time** (`wall`) stamps outbound signatures: receivers compare it with their real clock.

HTTP deadlines and those of handlers run in a thread are enforced inside `recoup.jobs.targets`
by the event loop's clock (`asyncio.timeout`): real time in every case.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from recoup.timekeeping.clock import Clock, SystemClock


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
    things take, real unless a test steps it) and `wall` (signature timestamps, real)."""

    due: Clock = field(default_factory=SystemClock)
    elapsed: Elapsed = field(default_factory=RealElapsed)
    wall: Callable[[], datetime] = _system_wall


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


__all__ = ["Elapsed", "RealElapsed", "Timer", "WorkerClock", "sleep", "wait_tasks"]
