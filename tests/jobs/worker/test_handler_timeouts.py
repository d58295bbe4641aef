"""The job's per-attempt timeout bounds Python handlers too: an async handler is cancelled, a
sync one in a thread stops being waited for; both are retried. Inline handlers are exempt."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import BackoffPolicy, JobState, PythonTarget, RunOutcome
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.worker import Worker
from recoup.timekeeping.clock import VirtualClock

START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RETRY = BackoffPolicy(max_attempts=3, min_backoff=timedelta(seconds=1))
TIMEOUT = timedelta(seconds=0.2)


def virtual(store: Any, **options: Any) -> tuple[Scheduler, Worker, VirtualClock]:
    clock = VirtualClock(START)
    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    return scheduler, scheduler.worker(rng=random.Random(1), **options), clock


def test_an_async_handler_past_its_timeout_is_cancelled_and_retried(jobstore: Any) -> None:
    registry = HandlerRegistry()
    cancelled: list[str] = []

    @registry.register("slow-first")
    async def slow_first(ctx: HandlerContext) -> str:
        if ctx.attempt == 1:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append("slow-first")
                raise
        return "done"

    @registry.register("swallows-first")
    async def swallows_first(ctx: HandlerContext) -> str:
        if ctx.attempt == 1:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append("swallows-first")
                return "too late"  # returning after the timeout is still a timeout
        return "done"

    @registry.register("quick")
    async def quick(ctx: HandlerContext) -> str:
        await asyncio.sleep(0.01)
        return "quick"

    # One slot: all three run one after another on one consumer, which outlives the timeouts.
    scheduler, worker, clock = virtual(jobstore, handlers=registry, concurrency=1)
    jobs = [
        scheduler.enqueue(PythonTarget(handler=name), retry=RETRY, timeout=TIMEOUT)
        for name in ("slow-first", "swallows-first", "quick")
    ]
    began = time.monotonic()
    assert worker.drain() == 3
    assert time.monotonic() - began < 10  # not the handlers' 30 s
    assert sorted(cancelled) == ["slow-first", "swallows-first"]
    for job in jobs[:2]:
        (run,) = scheduler.runs(job.id)
        assert run.outcome is RunOutcome.RETRY
        assert run.error == "timed out after 0.2 s"
        assert run.response_excerpt is None
        assert scheduler.get(job.id).state is JobState.SCHEDULED
    (run,) = scheduler.runs(jobs[2].id)
    assert run.outcome is RunOutcome.SUCCEEDED and run.response_excerpt == "quick"

    clock.advance(timedelta(seconds=10))
    assert worker.drain() == 2
    for job in jobs[:2]:
        assert scheduler.get(job.id).state is JobState.SUCCEEDED
        runs = scheduler.runs(job.id)
        assert [r.outcome for r in runs] == [RunOutcome.RETRY, RunOutcome.SUCCEEDED]
        assert runs[-1].response_excerpt == "done"


def test_a_sync_handler_past_its_timeout_is_no_longer_waited_for_and_is_retried(
    jobstore: Any,
) -> None:
    registry = HandlerRegistry()
    release = threading.Event()  # set once the timed-out attempt is written
    returned: list[int] = []

    @registry.register("blocking-first")
    def blocking_first(ctx: HandlerContext) -> str:
        if ctx.attempt == 1:
            assert release.wait(30)  # a thread cannot be killed: it outlives its attempt
        returned.append(ctx.attempt)
        return "done"

    def on_attempt(job: Any, run: Any) -> None:
        release.set()

    scheduler, worker, clock = virtual(jobstore, handlers=registry, on_attempt=on_attempt)
    job = scheduler.enqueue(PythonTarget(handler="blocking-first"), retry=RETRY, timeout=TIMEOUT)
    began = time.monotonic()
    assert worker.drain() == 1  # returns once the abandoned thread has returned too
    assert time.monotonic() - began < 10  # not the handler's 30 s
    assert returned == [1]  # it ran on after the worker stopped waiting, and nothing saw it
    (run,) = scheduler.runs(job.id)
    assert run.outcome is RunOutcome.RETRY
    assert run.error == "timed out after 0.2 s"
    assert run.duration_ms is not None and run.duration_ms >= 200

    clock.advance(timedelta(seconds=10))
    assert worker.drain() == 1
    assert scheduler.get(job.id).state is JobState.SUCCEEDED
    assert [r.outcome for r in scheduler.runs(job.id)] == [RunOutcome.RETRY, RunOutcome.SUCCEEDED]
    assert returned == [1, 2]


def test_handlers_within_their_timeout_are_unaffected(jobstore: Any) -> None:
    registry = HandlerRegistry()

    @registry.register("fast-async")
    async def fast_async(ctx: HandlerContext) -> str:
        await asyncio.sleep(0)
        return "async ok"

    @registry.register("fast-sync")
    def fast_sync(ctx: HandlerContext) -> str:
        return "sync ok"

    @registry.register("own-timeout")
    async def own_timeout(ctx: HandlerContext) -> None:
        raise TimeoutError("the upstream call timed out")  # the handler's, not the attempt's

    scheduler, worker, _ = virtual(jobstore, handlers=registry)
    a = scheduler.enqueue(PythonTarget(handler="fast-async"), retry=RETRY, timeout=TIMEOUT)
    s = scheduler.enqueue(PythonTarget(handler="fast-sync"), retry=RETRY, timeout=TIMEOUT)
    t = scheduler.enqueue(PythonTarget(handler="own-timeout"), retry=RETRY, timeout=TIMEOUT)
    assert worker.drain() == 3
    for job, excerpt in ((a, "async ok"), (s, "sync ok")):
        assert scheduler.get(job.id).state is JobState.SUCCEEDED
        (run,) = scheduler.runs(job.id)
        assert run.outcome is RunOutcome.SUCCEEDED and run.error is None
        assert run.response_excerpt == excerpt
    (run,) = scheduler.runs(t.id)
    assert run.outcome is RunOutcome.RETRY
    assert run.error == "TimeoutError: the upstream call timed out"


def test_the_timeout_does_not_apply_to_inline_handlers(jobstore: Any) -> None:
    registry = HandlerRegistry()
    # The handler outlasts its timeout three times over: a short timeout keeps the wait short.
    short = timedelta(seconds=0.05)
    registry.add("inline-slow", lambda ctx: time.sleep(3 * short.total_seconds()), inline=True)
    scheduler, worker, _ = virtual(jobstore, handlers=registry)
    job = scheduler.enqueue(PythonTarget(handler="inline-slow"), retry=RETRY, timeout=short)
    assert worker.drain() == 1
    assert scheduler.get(job.id).state is JobState.SUCCEEDED  # documented: not interruptible
