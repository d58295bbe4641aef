"""Due time and elapsed time in the worker: a virtual clock's jumps fire jobs but never touch
leases, which run on elapsed time (here stepped by hand); one session serves many steps."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import patch

import pytest

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import BackoffPolicy, Job, NewJob, PythonTarget, RunOutcome
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import ClaimParams
from recoup.jobs.time_travel import TestClock
from recoup.jobs.worker import Worker
from recoup.timekeeping.clock import VirtualClock
from tests.support import DEADLINE, ManualElapsed, eventually

START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
OPEN = SsrfGuard(allow_private=True)


class Refusing:
    """`store` whose heartbeats all fail (a database out of reach for the lease keeper)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def heartbeat(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the store is unreachable")


def test_a_three_day_jump_fires_three_days_of_jobs_in_order_and_expires_no_lease(
    jobstore: Any,
) -> None:
    clock = VirtualClock(START)
    elapsed = ManualElapsed()  # not a second of elapsed time passes
    fired: list[tuple[datetime, datetime]] = []  # (run_at, the due clock when it started)
    registry = HandlerRegistry()
    registry.add("tick", lambda ctx: fired.append((ctx.run_at, clock.now())), inline=True)
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    # A one-second lease: any due time mistaken for elapsed time would lapse it at once.
    worker = scheduler.worker(handlers=registry, elapsed=elapsed, lease=timedelta(seconds=1))
    instants = [START + timedelta(hours=h, minutes=(17 * h) % 60) for h in range(1, 72)]
    random.Random(3).shuffle(instants)
    jobs = [NewJob(run_at=at, target=PythonTarget(handler="tick")) for at in instants]
    scheduler.enqueue_many(jobs)

    ran = TestClock(clock, worker, jobstore, schedules=jobstore).advance(timedelta(days=3))

    assert ran == len(instants)
    assert [run_at for run_at, _ in fired] == sorted(instants)
    assert all(started == run_at for run_at, started in fired)  # each at its instant
    assert clock.now() == START + timedelta(days=3)
    for job in jobs:  # one attempt each: none lost, none run twice
        assert [(r.attempt, r.outcome) for r in scheduler.runs(job.id)] == [
            (1, RunOutcome.SUCCEEDED)
        ]
    assert worker.stats.revoked == 0 and worker.stats.rescued == 0
    assert elapsed.monotonic() == 0.0


def test_the_lease_watchdog_counts_elapsed_time_not_due_time(jobstore: Any) -> None:
    clock = VirtualClock(START)
    elapsed = ManualElapsed()
    started: list[int] = []
    interrupted: list[int] = []
    registry = HandlerRegistry()

    @registry.register("long")
    async def long(ctx: HandlerContext) -> None:
        started.append(ctx.attempt)
        try:
            await asyncio.sleep(DEADLINE)
        except asyncio.CancelledError:
            interrupted.append(ctx.attempt)
            raise

    scheduler = Scheduler(Refusing(jobstore), clock=clock, ssrf=OPEN)
    lease = timedelta(seconds=30)
    worker = scheduler.worker(handlers=registry, elapsed=elapsed, lease=lease)
    job = scheduler.enqueue(PythonTarget(handler="long"), retry=BackoffPolicy(max_attempts=3))

    async def scenario() -> None:
        async with worker.session():
            drain = asyncio.create_task(worker.run_until_idle())
            assert await eventually(lambda: started == [1])
            clock.advance(timedelta(days=3))  # due time jumps: our lease is no nearer lapsing
            for _ in range(10):
                await asyncio.sleep(0)
            assert worker.stats.revoked == 0 and interrupted == []
            # 80 % of a lease of elapsed time without a heartbeat: the watchdog gives it up.
            elapsed.advance(lease.total_seconds() * 0.8)
            assert worker.stats.revoked == 1
            assert await asyncio.wait_for(drain, DEADLINE) == 1

    asyncio.run(scenario())
    assert interrupted == [1]
    (run,) = scheduler.runs(job.id)
    assert run.outcome is RunOutcome.RETRY
    assert run.error is not None and "interrupted" in run.error


def test_one_session_serves_many_virtual_clock_steps(jobstore: Any) -> None:
    clock = VirtualClock(START)
    seen: list[datetime] = []
    registry = HandlerRegistry()
    registry.add("tick", lambda ctx: seen.append(ctx.run_at), inline=True)
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    worker = scheduler.worker(handlers=registry)
    instants = [START + timedelta(minutes=m) for m in range(1, 101)]
    scheduler.enqueue_many(
        [NewJob(run_at=at, target=PythonTarget(handler="tick")) for at in instants]
    )

    async def scenario() -> int:
        ran = 0
        async with worker.session():
            for at in instants:
                clock.set(at)
                ran += await worker.run_until_idle()
        return ran

    assert asyncio.run(scenario()) == 100
    assert seen == instants
    assert worker.stats.flushes == 100


def test_a_session_belongs_to_one_event_loop(jobstore: Any) -> None:
    worker: Worker = Scheduler(jobstore, ssrf=OPEN).worker()

    async def inner() -> None:
        async with worker.session():
            pass

    async def outer() -> None:
        async with worker.session():
            with pytest.raises(RuntimeError, match="another event loop"):
                await asyncio.to_thread(asyncio.run, inner())

    asyncio.run(outer())
    assert worker.drain() == 0  # and it opens again afterwards


def test_a_rate_limited_job_fired_later_than_its_slot_allows_goes_back_for_a_new_slot(
    jobstore: Any,
) -> None:
    """A rate's bound holds only if every start is within the tolerance of its slot
    (`recoup.jobs.flow`): one fired later is handed back unstarted, and runs in a new slot.
    It goes back inside the worker's next claim, which reserves that slot in the same
    transaction: a late start costs no write transaction of its own (on SQLite, each one
    made the other processes' claims and completions wait)."""
    clock = VirtualClock(START)
    seen: list[datetime] = []
    registry = HandlerRegistry()
    registry.add("tick", lambda ctx: seen.append(clock.now()), inline=True)
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    worker = scheduler.worker(handlers=registry)
    job = scheduler.enqueue(PythonTarget(handler="tick"), flow_key="k", flow_rate=1)
    releases: list[object] = []
    claims: list[ClaimParams] = []
    release, claim_due = jobstore.release, jobstore.claim_due

    def counted_release(*args: Any, **kwargs: Any) -> int:
        releases.append(args)
        return int(release(*args, **kwargs))

    def counted_claim(params: ClaimParams) -> list[Job]:
        claims.append(params)
        return list(claim_due(params))

    async def scenario() -> None:
        async with worker.session():
            claimed = await worker._firing.claim(clock.now(), timedelta(0), 10)
            assert [j.id for j in claimed] == [job.id]
            clock.set(START + timedelta(seconds=1))  # the loop was busy: a second late
            worker._firing.accept(claimed)
            assert await eventually(lambda: worker.stats.late_flow_starts == 1)
            assert seen == []
            # The next claim hands it back and reserves a new slot: after the key's next
            # free start.
            clock.set(START + timedelta(seconds=2))
            assert await worker.run_until_idle() == 1

    with patch.object(jobstore, "release", counted_release):
        with patch.object(jobstore, "claim_due", counted_claim):
            asyncio.run(scenario())
    assert seen == [START + timedelta(seconds=2)]
    assert releases == []
    assert [c.give_back for c in claims[:2]] == [(), (job.id,)]
    assert jobstore.get("default", job.id).attempts == 1  # the late one never counted
