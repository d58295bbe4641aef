"""A test clock advances in batches (ARCHITECTURE.md, 'Time in the worker'): the earliest due
jobs run together, each at its own instant (the due clock pinned inside its attempt); one job
group's jobs run one after another in due order; a retry that a batch schedules before the
clock's new now runs later at its own instant. Handlers get the session's HTTP client."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.errors import InvalidInput
from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import (
    BackoffPolicy,
    HttpTarget,
    Job,
    JobState,
    NewJob,
    PythonTarget,
    trusted,
)
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.time_travel import TestClock
from recoup.jobs.worker.firing import first_of_each_group
from recoup.timekeeping.clock import VirtualClock
from tests.jobs.support import Receiver
from tests.support import DEADLINE

START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
OPEN = SsrfGuard(allow_private=True)


def test_a_batch_runs_its_jobs_together_each_at_its_own_instant(jobstore: Any) -> None:
    clock = VirtualClock(START)
    count = 20
    seen: dict[datetime, datetime] = {}  # run_at → the due clock inside the attempt
    arrived = 0
    everyone: asyncio.Event | None = None

    async def meet(ctx: HandlerContext) -> None:
        # Every job waits until all have started: only jobs running together get past it.
        nonlocal arrived, everyone
        everyone = everyone or asyncio.Event()
        seen[ctx.run_at] = clock.now()
        arrived += 1
        if arrived == count:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), DEADLINE)
        assert clock.now() == ctx.run_at  # still pinned after the others started

    registry = HandlerRegistry()
    registry.add("meet", meet)
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    worker = scheduler.worker(handlers=registry, concurrency=count)
    instants = [START + timedelta(minutes=37 * i + 1) for i in range(count)]
    jobs = [NewJob(run_at=at, target=PythonTarget(handler="meet")) for at in instants]
    scheduler.enqueue_many(jobs)

    ran = TestClock(clock, worker, jobstore).advance(timedelta(days=1))

    assert ran == count
    assert seen == {at: at for at in instants}
    for job in jobs:  # the run log too: it started and ended at the job's instant
        (run,) = scheduler.runs(job.id)
        assert run.started_at == run.finished_at == job.run_at
    assert clock.now() == START + timedelta(days=1)


def test_the_jobs_of_one_group_run_one_after_another_in_due_order(jobstore: Any) -> None:
    clock = VirtualClock(START)
    order: list[str] = []
    running: set[str] = set()
    overlaps: list[tuple[str, str]] = []

    async def step(ctx: HandlerContext) -> None:
        name = str(ctx.name)
        group = name.split("-")[0]
        mates = [other for other in running if other.split("-")[0] == group]
        overlaps.extend((name, other) for other in mates)
        running.add(name)
        for _ in range(5):  # yield, so that anything running beside it gets to run
            await asyncio.sleep(0)
        running.discard(name)
        order.append(name)

    registry = HandlerRegistry()
    registry.add("step", step)
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    worker = scheduler.worker(handlers=registry, concurrency=50)
    jobs = [
        NewJob(
            run_at=START + timedelta(minutes=minute),
            target=PythonTarget(handler="step"),
            name=f"{group}-{minute}",
            group=None if group == "free" else group,
        )
        for group in ("inv1", "inv2", "free")
        for minute in (30, 10, 20)
    ]
    scheduler.enqueue_many(jobs)

    assert TestClock(clock, worker, jobstore).advance(timedelta(hours=1)) == 9

    assert all(a.startswith("free") for a, _ in overlaps)  # ungrouped jobs may overlap
    for group in ("inv1", "inv2"):
        assert [n for n in order if n.startswith(group)] == [f"{group}-{m}" for m in (10, 20, 30)]
    assert worker.stats.released > 0  # the later jobs of a group were given back, then ran


def test_a_retry_due_before_the_clocks_new_now_runs_at_its_own_instant(jobstore: Any) -> None:
    clock = VirtualClock(START)
    attempts: list[tuple[int, datetime, datetime]] = []  # (attempt, run_at, clock inside)

    def flaky(ctx: HandlerContext) -> None:
        attempts.append((ctx.attempt, ctx.run_at, clock.now()))
        if ctx.attempt == 1:
            raise RuntimeError("try again")

    registry = HandlerRegistry()
    registry.add("flaky", flaky)
    registry.add("late", lambda ctx: None)
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    worker = scheduler.worker(handlers=registry, concurrency=10)
    retry = BackoffPolicy(
        max_attempts=2, min_backoff=timedelta(seconds=5), max_backoff=timedelta(seconds=5)
    )
    first = NewJob(run_at=START, target=PythonTarget(handler="flaky"), retry=retry)
    late = NewJob(run_at=START + timedelta(hours=2), target=PythonTarget(handler="late"))
    scheduler.enqueue_many([first, late])

    assert TestClock(clock, worker, jobstore).advance(timedelta(hours=3)) == 3

    # The first attempt ran beside the late job (the clock then moved two hours on); its
    # retry, five seconds after its own instant, ran in the next batch at that instant.
    retried_at = START + timedelta(seconds=5)
    assert attempts == [(1, START, START), (2, retried_at, retried_at)]
    runs = scheduler.runs(first.id)
    assert [(r.started_at, r.finished_at) for r in runs] == [
        (START, START),
        (retried_at, retried_at),
    ]
    assert scheduler.get(first.id).state is JobState.SUCCEEDED


def a_job(**fields: Any) -> Job:
    """A job with only the given fields (the rest None): what these tests read of one."""
    return trusted(Job, {f.name: None for f in dataclasses.fields(Job)} | fields)


def test_first_of_each_group_keeps_the_earliest_of_each_group_in_order() -> None:
    jobs = [
        a_job(name=name, group=group, tenant=tenant)
        for name, group, tenant in [
            ("a1", "a", "t1"),
            ("x", None, "t1"),
            ("a2", "a", "t1"),
            ("a-other-tenant", "a", "t2"),
            ("y", None, "t1"),
            ("a3", "a", "t1"),
        ]
    ]
    first, later = first_of_each_group(jobs)
    assert [j.name for j in first] == ["a1", "x", "a-other-tenant", "y"]
    assert [j.name for j in later] == ["a2", "a3"]


def test_a_handler_gets_the_sessions_http_client_reused_across_attempts(
    jobstore: Any, receiver: Receiver
) -> None:
    clock = VirtualClock(START)
    clients: list[object] = []
    statuses: list[int | None] = []

    async def call(ctx: HandlerContext) -> None:
        assert ctx.http is not None
        client = ctx.http()
        clients.append(client)
        probe = a_job(
            id=ctx.job_id,
            tenant=ctx.tenant,
            run_at=ctx.run_at,
            target=HttpTarget(url=receiver.url, body={"n": ctx.attempt}),
            attempts=1,
            timeout=timedelta(seconds=10),
        )
        result = await client.send(probe, secret=None)
        statuses.append(result.status_code)

    registry = HandlerRegistry()
    registry.add("call", call)
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    worker = scheduler.worker(handlers=registry)
    scheduler.enqueue_many(
        [
            NewJob(run_at=START + timedelta(hours=h), target=PythonTarget(handler="call"))
            for h in range(1, 4)
        ]
    )

    assert TestClock(clock, worker, jobstore).advance(timedelta(hours=4)) == 3

    assert statuses == [200, 200, 200]
    assert len(clients) == 3 and all(c is clients[0] for c in clients)


def test_on_batch_follows_the_advance_batch_by_batch(jobstore: Any) -> None:
    clock = VirtualClock(START)
    registry = HandlerRegistry()
    registry.add("tick", lambda ctx: None, inline=True)
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    worker = scheduler.worker(handlers=registry, concurrency=4)
    scheduler.enqueue_many(
        [
            NewJob(run_at=START + timedelta(hours=h), target=PythonTarget(handler="tick"))
            for h in range(1, 11)
        ]
    )
    seen: list[tuple[int, datetime]] = []

    ran = TestClock(clock, worker, jobstore).advance_to(
        START + timedelta(days=1), on_batch=lambda done: seen.append((done, clock.now()))
    )

    # Four at a time: the clock at the latest instant of each batch.
    assert ran == 10
    assert seen == [
        (4, START + timedelta(hours=4)),
        (8, START + timedelta(hours=8)),
        (10, START + timedelta(hours=10)),
    ]


def test_handler_threads_runs_the_handlers_blocking_calls_in_that_many_threads(
    jobstore: Any,
) -> None:
    clock = VirtualClock(START)
    threads: set[str] = set()
    pinned: list[bool] = []

    def blocking(run_at: datetime) -> None:
        threads.add(threading.current_thread().name)
        pinned.append(clock.now() == run_at)  # the attempt's pinned clock reaches the thread
        time.sleep(0.005)  # still busy when the next call comes: a pool must add a thread

    async def call(ctx: HandlerContext) -> None:
        await asyncio.gather(*(asyncio.to_thread(blocking, ctx.run_at) for _ in range(8)))

    def advance(**options: Any) -> set[str]:
        registry = HandlerRegistry()
        registry.add("call", call)
        scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
        worker = scheduler.worker(handlers=registry, concurrency=8)
        at = clock.now() + timedelta(minutes=1)
        scheduler.enqueue_many(
            [NewJob(run_at=at, target=PythonTarget(handler="call")) for _ in range(8)]
        )
        threads.clear()
        assert TestClock(clock, worker, jobstore, **options).advance(timedelta(hours=1)) == 8
        return set(threads)

    assert len(advance(handler_threads=1)) == 1
    assert len(advance()) > 1  # asyncio's default pool: several threads side by side
    assert pinned and all(pinned)


def test_handler_threads_below_one_is_refused_naming_it(jobstore: Any) -> None:
    clock = VirtualClock(START)
    worker = Scheduler(jobstore, clock=clock, ssrf=OPEN).worker()
    with pytest.raises(InvalidInput) as refused:
        TestClock(clock, worker, jobstore, handler_threads=0)
    assert refused.value.field == "handler_threads"
