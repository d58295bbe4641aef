"""The threads that run the fast paths' store units, off the event loop (`recoup.api.fast_route`).

A unit blocks on the database (a commit's fsync, a round trip, a lock another process holds),
so it never runs on the loop, where it would stop every other request and SQLite's group
commit could batch nothing. anyio's `to_thread.run_sync` (Starlette's `run_in_threadpool`)
would run it too, at a cost measured at a sixth of a job creation's CPU on the loop's side
alone (its capacity limiter, cancel scopes and run variables, per call); here a call is a
future, a put on a queue and the result handed back by `call_soon_threadsafe`. The standard
library's `ThreadPoolExecutor` (40 workers, through `loop.run_in_executor`) was measured
beside it: `POST /v1/jobs` on SQLite at 16 connections through uvicorn, three interleaved
pairs, p99 125–135 ms against 32–39 ms here, 610–746 against 697–816 requests a second; anyio
gave 73–136 ms.

Threads start as calls find none idle, up to `limit`, and end after `idle_seconds` without
work, so an app that stops serving leaves none behind. A call sees its caller's context
variables, as with anyio. A caller cancelled while its unit runs stops waiting; the unit still
runs to its end (its transaction commits or rolls back whole) and its result is dropped.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_LIMIT = 40  # anyio's default number of worker threads
IDLE_SECONDS = 10.0

_Call = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[], Any]
]


class StoreThreads:
    """Runs blocking calls in threads of its own and awaits their results on the loop."""

    def __init__(self, *, limit: int = DEFAULT_LIMIT, idle_seconds: float = IDLE_SECONDS) -> None:
        if limit < 1:
            raise ValueError(f"limit: expected at least 1 thread, got {limit}")
        self._limit = limit
        self._idle_seconds = idle_seconds
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._queued = 0  # calls put and not yet taken by a thread

    @property
    def threads(self) -> int:
        """How many threads are running now."""
        return self._threads

    async def run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call(*args, **kwargs)` in one of the threads, in a copy of the caller's context."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()
        with self._lock:
            self._queued += 1
            start = self._queued > self._idle and self._threads < self._limit
            if start:
                self._threads += 1
        self._calls.put((loop, future, context, lambda: call(*args, **kwargs)))
        if start:
            threading.Thread(target=self._serve, name="recoup-store", daemon=True).start()
        return await future

    def _serve(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            try:
                loop, future, context, call = self._calls.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    if self._queued == 0:  # nothing put since: this thread ends
                        self._threads -= 1
                        return
                continue
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            try:
                result = context.run(call)
            except BaseException as exc:  # handed to the caller, which raises it
                _hand_back(loop, future, None, exc)
            else:
                _hand_back(loop, future, result, None)


def _hand_back(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    try:
        loop.call_soon_threadsafe(_settle, future, result, error)
    except RuntimeError:  # the loop closed while the call ran: nobody waits for it
        pass


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


__all__ = ["DEFAULT_LIMIT", "StoreThreads"]
