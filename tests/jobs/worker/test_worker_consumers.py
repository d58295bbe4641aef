"""Async Python handlers and HTTP requests run on the worker's consumer tasks (no task per
attempt): the concurrency limit, handler-level timeouts, revocation and shutdown behave as with
a task each."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import (
    BackoffPolicy,
    HttpTarget,
    JobState,
    NewJob,
    PythonTarget,
    RunOutcome,
)
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.targets import AttemptOutcome, AttemptResult, HttpExecutor
from recoup.jobs.worker.completions import MAX_HOLD, CompletionBuffer
from recoup.jobs.worker.ledger import Ledger, WorkerStats
from recoup.timekeeping.clock import VirtualClock
from tests.jobs.support import Receiver, Reply, claimed_job
from tests.support import ManualElapsed, eventually, wait_until

OPEN = SsrfGuard(allow_private=True)
ONCE = BackoffPolicy(max_attempts=1)
START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
FAST_RETRY = BackoffPolicy(
    max_attempts=5, min_backoff=timedelta(seconds=30), max_backoff=timedelta(seconds=60)
)


def run_all_due_now(
    jobstore: Any,
    registry: HandlerRegistry,
    handler: str,
    count: int,
    done: list[str],
    *,
    concurrency: int,
) -> tuple[Scheduler, list[NewJob]]:
    """`count` jobs of `handler` due now, through a worker running until `done` has them all."""
    scheduler = Scheduler(jobstore, ssrf=OPEN)
    with scheduler.running_worker(handlers=registry, concurrency=concurrency):
        # One insert, so that the time the handlers take is not the time enqueueing takes.
        now = datetime.now(UTC)
        jobs = [NewJob(run_at=now, target=PythonTarget(handler=handler)) for _ in range(count)]
        assert scheduler.enqueue_many(jobs) == count
        assert wait_until(lambda: len(done) == count)
    return scheduler, jobs


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

    scheduler, jobs = run_all_due_now(jobstore, registry, "nap", 15, done, concurrency=5)
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


def test_a_burst_of_handlers_that_never_suspend_is_carried_by_a_few_consumers(
    jobstore: Any,
) -> None:
    registry = HandlerRegistry()
    tasks: set[int] = set()
    done: list[str] = []

    @registry.register("count")
    async def count(ctx: HandlerContext) -> None:
        tasks.add(id(asyncio.current_task()))
        done.append(ctx.job_id)

    _, jobs = run_all_due_now(jobstore, registry, "count", 1000, done, concurrency=2000)
    # All started at once, yet one consumer and the one it keeps free ran them (a task each
    # would be a thousand), and every one of them ran exactly once.
    assert len(tasks) <= 4, len(tasks)
    assert sorted(done) == sorted(job.id for job in jobs)


@dataclass
class Sending:
    """What the worker's HTTP sends ran on: the tasks themselves (an id may be reused), and
    the most in flight at once."""

    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    in_flight: int = 0
    peak: int = 0


@pytest.fixture
def sending(monkeypatch: pytest.MonkeyPatch) -> Sending:
    seen = Sending()
    send = HttpExecutor.send

    async def observed(self: HttpExecutor, *args: Any, **kwargs: Any) -> AttemptResult:
        task = asyncio.current_task()
        assert task is not None
        seen.tasks.add(task)
        seen.in_flight += 1
        seen.peak = max(seen.peak, seen.in_flight)
        try:
            return await send(self, *args, **kwargs)
        finally:
            seen.in_flight -= 1

    monkeypatch.setattr(HttpExecutor, "send", observed)
    return seen


def test_http_requests_run_on_a_few_consumers_side_by_side_not_a_task_each(
    jobstore: Any, receiver: Receiver, sending: Sending
) -> None:
    scheduler = Scheduler(jobstore, ssrf=OPEN)
    # Due together and claimed ahead in full (the horizon), so that the ten running requests
    # are followed at once by the next ready ones: due jobs claimed as slots free up would let
    # the run queue empty between claims, and a consumer ends when it finds none waiting.
    with scheduler.running_worker(concurrency=10, horizon=timedelta(seconds=3)):
        run_at = datetime.now(UTC) + timedelta(seconds=1)
        target = HttpTarget(url=receiver.url)
        jobs = [NewJob(run_at=run_at, target=target) for _ in range(200)]
        scheduler.enqueue_many(jobs)
        assert wait_until(
            lambda: all(scheduler.get(j.id).state is JobState.SUCCEEDED for j in jobs[-5:])
        )
        assert wait_until(lambda: len(receiver.requests) == 200)
    # Ten requests in flight at once, carried by at most the ten consumers and the one they
    # keep free: a task per request would be two hundred.
    assert sending.peak == 10
    assert len(sending.tasks) <= 11, len(sending.tasks)
    assert all(scheduler.get(job.id).state is JobState.SUCCEEDED for job in jobs)


def test_a_request_past_its_timeout_leaves_its_consumer_to_run_the_next(
    jobstore: Any, receiver: Receiver, sending: Sending
) -> None:
    receiver.reply(Reply(200, delay=1.0))  # the first request is answered after its timeout
    clock = VirtualClock(START)
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    hasty, after = (
        scheduler.enqueue(
            HttpTarget(url=receiver.url), retry=FAST_RETRY, timeout=timedelta(seconds=0.2)
        )
        for _ in range(2)
    )
    assert scheduler.worker(concurrency=1).drain() == 2
    (cut,) = scheduler.runs(hasty.id)
    assert cut.outcome is RunOutcome.RETRY and cut.error == "timed out after 0.2 s"
    (run,) = scheduler.runs(after.id)
    assert run.outcome is RunOutcome.SUCCEEDED
    # The timeout cancelled the consumer's request, not the consumer: it ran the next one.
    assert len(sending.tasks) == 1


def test_a_flush_waits_for_queued_attempts_but_no_longer_than_its_bound() -> None:
    asyncio.run(flush_while_attempts_are_queued())


async def flush_while_attempts_are_queued() -> None:
    written: list[int] = []

    async def complete_many(completions: Any) -> None:
        written.append(len(completions))

    elapsed = ManualElapsed()
    ledger = Ledger(WorkerStats())
    buffer = CompletionBuffer(
        complete_many=complete_many,
        ledger=ledger,
        elapsed=elapsed,
        rng=random.Random(1),
        worker_id="w",
        flush_size=1,  # no pause for the batch to grow: only the hold delays the flush
        flush_interval=0.005,
        on_attempt=None,
        written=lambda: None,
    )
    queued = [True]
    buffer.hold = lambda: queued[0]
    buffer.open()
    ledger.idle = asyncio.Event()
    held = ledger.hold(claimed_job(1, ONCE))
    ledger.start(held)
    ledger.finish(held)
    buffer.add(held, AttemptResult(AttemptOutcome.SUCCEEDED), START, START)
    loop = asyncio.create_task(buffer.flush_loop())
    try:
        for _ in range(50):
            await asyncio.sleep(0)
        assert written == []  # attempts still queued: they run first
        queued[0] = False
        assert await eventually(lambda: written == [1])
        queued[0] = True  # queued for good: the bound lets the next flush through
        held = ledger.hold(claimed_job(1, ONCE, job_id="job_2"))
        ledger.start(held)
        ledger.finish(held)
        buffer.add(held, AttemptResult(AttemptOutcome.SUCCEEDED), START, START)
        for _ in range(50):
            await asyncio.sleep(0)
        assert written == [1]
        elapsed.advance(MAX_HOLD)
        assert await eventually(lambda: written == [1, 1])
    finally:
        loop.cancel()
