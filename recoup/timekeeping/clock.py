"""Where "now" comes from: a protocol, the system clock, and a settable clock."""

from __future__ import annotations

import threading
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

    Thread-safe, so a worker thread and a test can share one.
    """

    def __init__(self, start: datetime) -> None:
        self._now = require_aware("start", start).astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

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
