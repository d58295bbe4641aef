"""Helpers shared by the test packages: waiting for a condition with a deadline, and elapsed
time that a test steps by hand (`ManualElapsed`, the worker's `elapsed=`)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

DEADLINE = 30.0  # seconds a test waits for a condition (a loaded machine is slow)


def wait_until(
    predicate: Callable[[], bool], timeout: float = DEADLINE, *, interval: float = 0.01
) -> bool:
    """Poll `predicate` until it holds (True) or `timeout` seconds passed (its last answer).
    For conditions that must come true; never to show that something does not happen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


async def eventually(predicate: Callable[[], bool], timeout: float = DEADLINE) -> bool:
    """`wait_until` inside an event loop: the loop runs while it waits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.005)
    return predicate()


@dataclass(order=True)
class ManualTimer:
    when: float
    seq: int
    callback: Callable[[], object] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualElapsed:
    """Elapsed time that moves only on `advance()`: pass it as a worker's `elapsed=`, and the
    worker's heartbeats, lease watchdog, consumer timeouts, maintenance intervals, idle sleeps
    and flush pauses wait for the test. Use it from the worker's event loop."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.armed = 0  # timers armed so far
        self._timers: list[ManualTimer] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self.now

    def call_later(self, seconds: float, callback: Callable[[], object]) -> ManualTimer:
        timer = ManualTimer(self.now + max(seconds, 0.0), next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        self.armed += 1
        return timer

    def advance(self, seconds: float) -> None:
        """Move time `seconds` forward, running every timer due by then, in order, each at
        its own instant."""
        until = self.now + seconds
        while self._timers and self._timers[0].when <= until:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self.now = max(self.now, timer.when)
            timer.callback()
        self.now = until


__all__ = ["DEADLINE", "ManualElapsed", "ManualTimer", "eventually", "wait_until"]
