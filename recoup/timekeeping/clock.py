"""Where "now" comes from: a protocol, the system clock, and a settable clock."""

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

    def now(self) -> datetime:
        return datetime.now(UTC)


class VirtualClock:
    """A clock that moves only when told: for tests, replays and the demo.

    Thread-safe, so a worker thread and a test can share one. `pinned(instant)` makes it
    read one fixed instant in one context only (a task, a thread, and what they start).
    """

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
