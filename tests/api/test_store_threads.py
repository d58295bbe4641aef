"""`recoup.api.store_threads`: the fast paths' store units run in threads started on demand up
to a limit, see the caller's context, hand back results and errors, end when idle, and a
cancelled caller leaves its unit to finish."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from recoup.api.store_threads import StoreThreads

WAIT = 10.0  # seconds a test waits for threads before it fails, never in a passing run

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


def test_a_call_runs_in_another_thread_with_the_callers_context_and_hands_back_its_result() -> None:
    threads = StoreThreads()

    def where(tag: str, *, times: int) -> tuple[str, str, bool]:
        return tag * times, request_id.get(), threading.current_thread() is main

    main = threading.current_thread()

    async def call() -> tuple[str, str, bool]:
        request_id.set("req-1")
        return await threads.run(where, "ab", times=2)

    assert asyncio.run(call()) == ("abab", "req-1", False)


def test_an_error_of_the_call_is_raised_to_the_caller_and_the_threads_go_on() -> None:
    threads = StoreThreads(limit=1)

    def fails() -> None:
        raise LookupError("no such row")

    async def calls() -> int:
        with pytest.raises(LookupError, match="no such row"):
            await threads.run(fails)
        return await threads.run(len, "abc")

    assert asyncio.run(calls()) == 3


def test_calls_that_wait_for_each_other_each_get_a_thread_up_to_the_limit() -> None:
    together = threading.Barrier(8, timeout=WAIT)  # broken (an error) unless 8 run at once
    threads = StoreThreads(limit=8)

    async def calls() -> list[int]:
        return await asyncio.gather(*(threads.run(together.wait) for _ in range(8)))

    assert sorted(asyncio.run(calls())) == list(range(8))
    assert threads.threads == 8


def test_no_more_than_the_limit_run_at_once_and_the_rest_wait_their_turn() -> None:
    threads = StoreThreads(limit=2)
    release = threading.Event()
    lock = threading.Lock()
    running, most = 0, 0

    def unit(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(WAIT)
        with lock:
            running -= 1
        return n

    async def calls() -> list[int]:
        pending = [asyncio.ensure_future(threads.run(unit, n)) for n in range(5)]
        await asyncio.sleep(0.05)  # let the two threads take their calls
        release.set()
        return await asyncio.gather(*pending)

    assert asyncio.run(calls()) == [0, 1, 2, 3, 4]
    assert most == 2
    assert threads.threads == 2


def test_idle_threads_end_and_a_later_call_starts_one_again() -> None:
    threads = StoreThreads(idle_seconds=0.01)
    assert asyncio.run(threads.run(sum, [1, 2])) == 3
    deadline = time.monotonic() + WAIT
    while threads.threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threads.threads == 0
    assert asyncio.run(threads.run(sum, [3, 4])) == 7


def test_a_cancelled_caller_stops_waiting_and_its_unit_still_runs_to_its_end() -> None:
    threads = StoreThreads()
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def unit() -> str:
        started.set()
        release.wait(WAIT)
        finished.set()
        return "committed"

    async def cancelled_then_another() -> str:
        call = asyncio.ensure_future(threads.run(unit))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, WAIT)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        release.set()
        return await threads.run(str.upper, "next")

    assert asyncio.run(cancelled_then_another()) == "NEXT"
    assert finished.wait(WAIT)


def test_a_limit_below_one_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="limit"):
        StoreThreads(limit=0)
