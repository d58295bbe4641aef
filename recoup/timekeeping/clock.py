"""Where "now" comes from: a protocol, the system clock, a settable clock, and a clock offset
from another. A clock reads wall time (the machine's, maybe offset) or virtual time:
`reads_wall_time` tells which, and only a wall clock may be set right by the database's
(ARCHITECTURE.md, 'Clock skew')."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Protocol

from recoup.timekeeping.instants import require_aware


class Clock(Protocol):
    """A source of the current instant (always timezone-aware, in UTC)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The machine's clock. Only the imperative shell (worker, API, CLI) constructs one."""

    wall = True  # real time: see `reads_wall_time`

    def now(self) -> datetime:
        return datetime.now(UTC)


class VirtualClock:
    """A clock that moves only when told: for tests, replays and the demo.

    Thread-safe, so a worker thread and a test can share one. `pinned(instant)` makes it
    read one fixed instant in one context only (a task, a thread, and what they start).
    """

    wall = False  # virtual time: never set right by another clock

    def __init__(self, start: datetime) -> None:
        self._now = require_aware("start", start).astimezone(UTC)
        self._lock = threading.Lock()
        self._pin: contextvars.ContextVar[datetime | None] = contextvars.ContextVar(
            "recoup_virtual_clock_pin", default=None
        )

    def now(self) -> datetime:
        pinned = self._pin.get()
        if pinned is not None:
            return pinned
        with self._lock:
            return self._now

    @contextlib.contextmanager
    def pinned(self, instant: datetime) -> Iterator[None]:
        """Inside the block, `now()` reads `instant` in this context only: the running task or
        thread, the tasks it creates and the threads it starts with `asyncio.to_thread` (they
        copy the context), not other tasks or threads, which go on reading the clock. A test
        clock runs a job this way at its own instant while the clock has moved on to the
        instant of a later job running beside it."""
        token = self._pin.set(require_aware("instant", instant).astimezone(UTC))
        try:
            yield
        finally:
            self._pin.reset(token)

    def set(self, instant: datetime) -> None:
        instant = require_aware("instant", instant).astimezone(UTC)
        with self._lock:
            if instant < self._now:
                raise ValueError(f"a virtual clock never goes back: {instant} < {self._now}")
            self._now = instant

    def advance(self, delta: timedelta) -> datetime:
        if delta < timedelta(0):
            raise ValueError(f"a virtual clock never goes back: advance by {delta}")
        with self._lock:
            self._now += delta
            return self._now


class OffsetClock:
    """Another clock read `offset` away, the offset settable (thread-safe: one assignment).
    A wall clock stays one: the worker's due clock set on the database's clock by its measured
    skew (`recoup.jobs.worker.clocks.align`), and a test's clock minutes ahead or behind."""

    def __init__(self, base: Clock, offset: timedelta = timedelta(0)) -> None:
        self.base = base
        self.offset = offset

    @property
    def wall(self) -> bool:
        return reads_wall_time(self.base)

    def now(self) -> datetime:
        return self.base.now() + self.offset


def reads_wall_time(clock: Clock) -> bool:
    """Whether `clock` reads real time (the machine's clock, maybe offset), not virtual time
    (tests, replays, the demo, test clocks): only then do the store's clock and it measure the
    same time, so that the store's may decide in its place. A clock that does not say reads
    virtual time."""
    return getattr(clock, "wall", False) is True
