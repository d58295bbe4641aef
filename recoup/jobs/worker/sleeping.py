"""Sleeping and waking: the idle sleep until something can happen, the wake-up event (pokes,
notifications, written completions, stops) and the thread that listens for notifications."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from recoup.jobs.worker.clocks import Elapsed

log = logging.getLogger("recoup.worker")

MIN_SLEEP = 0.002  # seconds; the shortest idle sleep, so a contended claim cannot spin
NOTIFY_WAIT = 0.1  # seconds each `wait_for_notify` call blocks (and stop waits for the listener)


class Sleeper:
    """The main loop sleeps (`sleep`) until the earliest due instant it knows of (minus the
    horizon), a maintenance deadline, a notification or a poke, whichever is first; never
    longer than `max_sleep`, for writers that cannot notify (SQLite in another process).

    Waiting is in elapsed time; the distance to a due instant is measured by the due clock.
    `wake()` (from the loop) and `wake_threadsafe()` (from anywhere) end a sleep at once."""

    def __init__(
        self,
        *,
        now: Callable[[], datetime],
        elapsed: Elapsed,
        horizon: timedelta,
        max_sleep: float,
        worker_id: str,
    ) -> None:
        self._now = now
        self._elapsed = elapsed
        self._horizon = horizon
        self._max_sleep = max_sleep
        self._worker_id = worker_id
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener_stop = threading.Event()

    def open(self) -> None:
        """Bind to the session's event loop."""
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()

    def close(self) -> None:
        self._loop = None

    def wake(self) -> None:
        if self._event is not None:
            self._event.set()

    def wake_threadsafe(self) -> None:
        """Wake the sleeping loop; safe from any thread (nothing happens without a session)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self.wake)

    def call_threadsafe(self, callback: Callable[[], None]) -> bool:
        """Run `callback` on the session's loop; False when no session is open."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return False
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(callback)
        return True

    async def sleep(self, until_deadline: float, next_due: datetime | None) -> None:
        """Sleep until `until_deadline` seconds have passed, `next_due` (minus the horizon)
        has come, or a wake-up."""
        timeout = min(self._max_sleep, max(until_deadline, 0.0))
        if next_due is not None:
            ahead = (next_due - self._horizon - self._now()).total_seconds()
            timeout = min(timeout, ahead)
        await self.wait(max(timeout, MIN_SLEEP))

    async def wait(self, timeout: float) -> None:
        """Wait for a wake-up, at most `timeout` seconds of elapsed time."""
        event = self._event
        assert event is not None
        if not event.is_set():
            timer = self._elapsed.call_later(timeout, event.set)
            try:
                await event.wait()
            finally:
                timer.cancel()
        event.clear()

    def listen(self, wait_for_notify: Callable[[float], bool]) -> threading.Thread:
        """Start the thread that wakes the loop whenever `wait_for_notify` (the store's
        LISTEN/NOTIFY, or its in-process equivalent) reports new work; `stop_listening()`
        ends it within `NOTIFY_WAIT`."""
        self._listener_stop.clear()

        def listen() -> None:
            while not self._listener_stop.is_set():
                began = self._elapsed.monotonic()
                try:
                    notified = bool(wait_for_notify(NOTIFY_WAIT))
                except Exception:
                    log.warning("worker %s: wait_for_notify failed", self._worker_id, exc_info=True)
                    notified = False
                if notified:
                    self.wake_threadsafe()
                else:
                    # A store without notifications may return at once; do not spin.
                    rest = NOTIFY_WAIT - (self._elapsed.monotonic() - began)
                    if rest > 0:
                        self._listener_stop.wait(rest)

        thread = threading.Thread(target=listen, name="recoup-notify", daemon=True)
        thread.start()
        return thread

    def stop_listening(self) -> None:
        self._listener_stop.set()


__all__ = ["MIN_SLEEP", "NOTIFY_WAIT", "Sleeper"]
