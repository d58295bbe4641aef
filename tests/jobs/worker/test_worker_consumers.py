"""Async Python handlers run on the worker's consumer tasks (no task per attempt): the
concurrency limit, handler-level timeouts, revocation and shutdown behave as with a task each."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import BackoffPolicy, JobState, NewJob, PythonTarget, RunOutcome
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from tests.support import wait_until

OPEN = SsrfGuard(allow_private=True)
ONCE = BackoffPolicy(max_attempts=1)
FAST_RETRY = BackoffPolicy(
    max_attempts=5, min_backoff=timedelta(seconds=30), max_backoff=timedelta(seconds=60)
)


def test_suspending_handlers_run_side_by_side_up_to_the_limit(jobstore: Any) -> None:
    registry = HandlerRegistry()
    running = 0
    peak = 0
    done: list[str] = []
    spans: list[float] = []  # when each attempt started and ended

    @registry.register("nap")
    async def nap(ctx: HandlerContext) -> None:
        nonlocal running, peak
        spans.append(time.monotonic())
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.2)
        running -= 1
        spans.append(time.monotonic())
        done.append(ctx.job_id)

    scheduler = Scheduler(jobstore, ssrf=OPEN)
    with scheduler.running_worker(handlers=registry, concurrency=5):
        # One insert, so that the time the handlers take is not the time enqueueing takes.
        now = datetime.now(UTC)
        jobs = [NewJob(run_at=now, target=PythonTarget(handler="nap")) for _ in range(15)]
        assert scheduler.enqueue_many(jobs) == 15
        assert wait_until(lambda: len(done) == 15)
    elapsed = max(spans) - min(spans)
    assert peak == 5
    assert elapsed < 2.0, elapsed  # three rounds of 0.2 s, not fifteen
    for job in jobs:
        assert wait_until(lambda j=job: scheduler.get(j.id).state is JobState.SUCCEEDED)


def test_a_handler_may_use_asyncio_timeout_and_its_consumer_goes_on(jobstore: Any) -> None:
    registry = HandlerRegistry()
    seen: list[str] = []

    @registry.register("bounded")
    async def bounded(ctx: HandlerContext) -> None:
        if ctx.payload == "slow":
            async with asyncio.timeout(0.05):  # needs a current task
                await asyncio.sleep(5)
        seen.append(str(ctx.payload))

    scheduler = Scheduler(jobstore, ssrf=OPEN)
    with scheduler.running_worker(handlers=registry, concurrency=1):
        slow = scheduler.enqueue(PythonTarget(handler="bounded"), payload="slow", retry=ONCE)
        quick = [
            scheduler.enqueue(PythonTarget(handler="bounded"), payload=f"q{i}") for i in range(5)
        ]
        assert wait_until(lambda: len(seen) == 5)
        assert wait_until(lambda: scheduler.get(slow.id).state is JobState.FAILED)
    (run,) = scheduler.runs(slow.id)
    assert run.outcome is RunOutcome.FAILED
    assert run.error is not None and "TimeoutError" in run.error
    for job in quick:
        assert scheduler.get(job.id).state is JobState.SUCCEEDED


def test_revoking_a_running_attempt_leaves_the_next_ones_alone(jobstore: Any) -> None:
    registry = HandlerRegistry()
    started = threading.Event()
    after: list[str] = []

    @registry.register("stubborn")
    async def stubborn(ctx: HandlerContext) -> None:
        if ctx.payload == "first":
            started.set()
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                return  # swallows its revocation: the next attempt must not inherit it
        await asyncio.sleep(0.05)
        after.append(str(ctx.payload))

    scheduler = Scheduler(jobstore, ssrf=OPEN)
    lease = timedelta(seconds=1.5)  # heartbeats every 0.5 s notice the cancellation
    with scheduler.running_worker(handlers=registry, concurrency=1, lease=lease):
        first = scheduler.enqueue(PythonTarget(handler="stubborn"), payload="first")
        assert started.wait(5)
        rest = [
            scheduler.enqueue(PythonTarget(handler="stubborn"), payload=f"n{i}") for i in range(3)
        ]
        scheduler.cancel(first.id)
        assert wait_until(lambda: len(after) == 3)
    assert scheduler.get(first.id).state is JobState.CANCELLED
    for job in rest:
        assert scheduler.get(job.id).state is JobState.SUCCEEDED
        assert [r.outcome for r in scheduler.runs(job.id)] == [RunOutcome.SUCCEEDED]


def test_stopping_past_the_grace_interrupts_running_attempts(jobstore: Any) -> None:
    registry = HandlerRegistry()
    started: list[str] = []

    @registry.register("long")
    async def long(ctx: HandlerContext) -> None:
        started.append(ctx.job_id)
        await asyncio.sleep(30)

    scheduler = Scheduler(jobstore, ssrf=OPEN)
    with scheduler.running_worker(handlers=registry, concurrency=3, grace=timedelta(seconds=0.2)):
        jobs = [scheduler.enqueue(PythonTarget(handler="long"), retry=FAST_RETRY) for _ in range(3)]
        assert wait_until(lambda: len(started) == 3)
    for job in jobs:
        after = scheduler.get(job.id)
        assert after.state is JobState.SCHEDULED  # retried later, not lost nor run twice
        (run,) = scheduler.runs(job.id)
        assert run.outcome is RunOutcome.RETRY
        assert run.error is not None and "interrupted" in run.error
