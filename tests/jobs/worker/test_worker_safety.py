"""The worker when things go wrong: failing store calls, lost leases, stalls, cancellations,
saturation, early timers and crashes. Real stores (SQLite and PostgreSQL), real time, and a
store wrapper that makes chosen operations fail."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import BackoffPolicy, JobState, NewJob, PythonTarget, RunOutcome
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import ClaimParams
from recoup.jobs.worker import Worker
from recoup.jobs.worker import maintenance as worker_module
from recoup.timekeeping.clock import SystemClock, VirtualClock
from tests.support import DEADLINE, ManualElapsed, eventually, wait_until

OPEN = SsrfGuard(allow_private=True)
START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
ONCE = BackoffPolicy(max_attempts=1)
FAST_RETRY = BackoffPolicy(
    max_attempts=5, min_backoff=timedelta(seconds=1), max_backoff=timedelta(seconds=10)
)


class Faulty:
    """`store`, with the operations named in `faults` replaced (the rest pass through)."""

    def __init__(self, store: Any, **faults: Callable[..., Any]) -> None:
        self.store = store
        self.faults = faults

    def __getattr__(self, name: str) -> Any:
        fault = self.faults.get(name)
        return fault if fault is not None else getattr(self.store, name)


def refuse(*args: Any, **kwargs: Any) -> Any:
    raise ConnectionError("the store is unreachable")


def noop_registry(calls: list[int] | None = None) -> HandlerRegistry:
    registry = HandlerRegistry()
    registry.add("noop", lambda ctx: None if calls is None else calls.append(ctx.attempt))
    return registry


# 1. Maintenance


def test_a_failing_rescue_does_not_keep_due_jobs_from_running(jobstore: Any) -> None:
    store = Faulty(jobstore, rescue_expired=refuse)
    scheduler = Scheduler(store, ssrf=OPEN)
    with scheduler.running_worker(handlers=noop_registry()):
        job = scheduler.enqueue(PythonTarget(handler="noop"))
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED, 10)


def test_failing_schedules_and_pruning_do_not_keep_due_jobs_from_running(jobstore: Any) -> None:
    store = Faulty(jobstore, due_schedules=refuse, prune=refuse)
    scheduler = Scheduler(store, ssrf=OPEN)
    with scheduler.running_worker(handlers=noop_registry()):
        job = scheduler.enqueue(PythonTarget(handler="noop"))
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED, 10)


# 2. Completions


def test_a_failed_flush_is_retried_on_a_quiet_worker(jobstore: Any) -> None:
    failures = [ConnectionError("the store went away for a moment")]

    def complete_once_failing(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return jobstore.complete_many(*args, **kwargs)

    store = Faulty(jobstore, complete_many=complete_once_failing)
    scheduler = Scheduler(store, ssrf=OPEN)
    with scheduler.running_worker(handlers=noop_registry()):
        job = scheduler.enqueue(PythonTarget(handler="noop"))
        # No other completion comes to ask for another flush: the failed one retries alone.
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED, 3)
        assert not failures
        assert [r.outcome for r in scheduler.runs(job.id)] == [RunOutcome.SUCCEEDED]


# 3. Leases


def test_a_worker_whose_heartbeats_fail_gives_up_its_jobs_before_its_lease_lapses(
    jobstore: Any,
) -> None:
    lease = timedelta(seconds=2)
    started = threading.Event()
    interrupted: list[float] = []
    registry = HandlerRegistry()

    @registry.register("slow")
    async def slow(ctx: HandlerContext) -> None:
        began = time.monotonic()
        started.set()
        try:
            await asyncio.sleep(20)
        except asyncio.CancelledError:
            interrupted.append(time.monotonic() - began)
            raise

    store = Faulty(jobstore, heartbeat=refuse)
    scheduler = Scheduler(store, ssrf=OPEN)
    with scheduler.running_worker(
        handlers=registry, lease=lease, horizon=timedelta(seconds=10)
    ) as worker:
        running = scheduler.enqueue(PythonTarget(handler="slow"), retry=FAST_RETRY)
        waiting = scheduler.enqueue(
            PythonTarget(handler="slow"), delay=timedelta(seconds=8), retry=FAST_RETRY
        )
        assert started.wait(DEADLINE)
        assert wait_until(lambda: bool(interrupted))
        # Interrupted before its lease could lapse (no heartbeat ever extended it), and the
        # claimed job that had not started was given up too.
        assert interrupted[0] < lease.total_seconds()
        assert worker.stats.revoked >= 2
    # Both come back through rescue, for a worker that can heartbeat to run.
    assert scheduler.get(running.id).attempts == 1
    assert scheduler.get(waiting.id).attempts == 1


def test_a_job_claimed_again_after_a_stall_never_runs_twice_at_once(jobstore: Any) -> None:
    clock = VirtualClock(START)
    stalled = threading.Event()
    release_second = threading.Event()
    events: list[str] = []
    registry = HandlerRegistry()

    @registry.register("work")
    async def work(ctx: HandlerContext) -> None:
        events.append(f"start {ctx.attempt}")
        try:
            if ctx.attempt == 1:
                await asyncio.sleep(60)
            while not release_second.is_set():
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            events.append(f"interrupted {ctx.attempt}")
            raise
        events.append(f"end {ctx.attempt}")

    def heartbeat(*args: Any, **kwargs: Any) -> Any:
        if stalled.is_set():
            raise TimeoutError("the worker is stalled")
        return jobstore.heartbeat(*args, **kwargs)

    store = Faulty(jobstore, heartbeat=heartbeat)
    scheduler = Scheduler(store, clock=clock, ssrf=OPEN)
    with scheduler.running_worker(
        handlers=registry,
        heartbeat_interval=timedelta(seconds=0.1),
        rescue_interval=timedelta(seconds=0.1),
    ) as worker:
        stalled.set()  # no heartbeat gets through: the lease lapses (in virtual time)
        job = scheduler.enqueue(PythonTarget(handler="work"), retry=FAST_RETRY)
        assert wait_until(lambda: "start 1" in events)
        clock.advance(timedelta(seconds=31))
        # The worker rescues its own lapsed lease and claims the job again.
        assert wait_until(lambda: "start 2" in events)
        assert events[:3] == ["start 1", "interrupted 1", "start 2"]
        # The stale attempt's completion (refused: another attempt runs) is written...
        assert wait_until(lambda: worker.stats.flushes >= 1)
        # ...without dropping the running attempt: it is still heartbeat.
        stalled.clear()
        clock.advance(timedelta(seconds=10))
        expected = clock.now() + worker.lease
        assert wait_until(lambda: scheduler.get(job.id).lease_expires_at == expected)
        release_second.set()
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED)
    assert events == ["start 1", "interrupted 1", "start 2", "end 2"]
    runs = scheduler.runs(job.id)
    assert [(r.attempt, r.outcome) for r in runs] == [
        (1, RunOutcome.LOST),
        (2, RunOutcome.SUCCEEDED),
    ]


def test_a_stale_attempt_stops_when_its_worker_id_claimed_the_job_again_elsewhere(
    jobstore: Any,
) -> None:
    # Two processes under one configured worker id (a restart while the old one was stalled):
    # the old one's heartbeat must not extend the new attempt's lease for its stale attempt.
    clock = VirtualClock(START)
    stalled = threading.Event()
    interrupted = threading.Event()
    registry = HandlerRegistry()

    @registry.register("work")
    async def work(ctx: HandlerContext) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            interrupted.set()
            raise

    def while_running(operation: str, idle: Any) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if stalled.is_set():
                if idle is None:
                    raise TimeoutError("the worker is stalled")
                return idle
            return getattr(jobstore, operation)(*args, **kwargs)

        return call

    store = Faulty(
        jobstore,
        heartbeat=while_running("heartbeat", None),
        claim_due=while_running("claim_due", []),
        rescue_expired=while_running("rescue_expired", []),
    )
    scheduler = Scheduler(store, clock=clock, ssrf=OPEN)
    with scheduler.running_worker(
        handlers=registry, worker_id="pinned", heartbeat_interval=timedelta(seconds=0.1)
    ) as worker:
        job = scheduler.enqueue(PythonTarget(handler="work"), retry=FAST_RETRY)
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.RUNNING)
        assert wait_until(lambda: worker.stats.started == 1)
        stalled.set()
        later = clock.advance(timedelta(seconds=31))
        # A lease heartbeat begun before the stall may still hold the row, which the rescue
        # skips (SKIP LOCKED): try until it is free.
        assert wait_until(lambda: jobstore.rescue_expired(now=later) == [job.id])
        params = ClaimParams(
            worker_id="pinned", now=later, horizon=timedelta(0), lease=worker.lease, limit=1
        )
        (again,) = jobstore.claim_due(params)  # the other process under the same id
        assert again.attempts == 2
        stalled.clear()
        assert interrupted.wait(DEADLINE)
        assert worker.stats.revoked == 1
    # The old attempt's completion was refused: the new attempt's lease is untouched.
    after = scheduler.get(job.id)
    assert after.state is JobState.RUNNING and after.attempts == 2


# 4. Cancellation


def test_a_job_cancelled_while_running_keeps_its_cancelled_run(jobstore: Any) -> None:
    started = threading.Event()
    registry = HandlerRegistry()

    @registry.register("slow")
    async def slow(ctx: HandlerContext) -> None:
        started.set()
        await asyncio.sleep(60)

    scheduler = Scheduler(jobstore, ssrf=OPEN)
    observed: list[RunOutcome] = []
    with scheduler.running_worker(
        handlers=registry,
        lease=timedelta(seconds=1.5),
        on_attempt=lambda job, run: observed.append(run.outcome),
    ) as worker:
        job = scheduler.enqueue(PythonTarget(handler="slow"), retry=FAST_RETRY)
        assert started.wait(DEADLINE)
        scheduler.cancel(job.id)
        assert wait_until(lambda: worker.stats.revoked == 1)
        assert wait_until(lambda: len(scheduler.runs(job.id)) == 1)
    (run,) = scheduler.runs(job.id)
    assert run.outcome is RunOutcome.CANCELLED and run.attempt == 1
    assert run.worker_id == worker.worker_id
    assert scheduler.get(job.id).state is JobState.CANCELLED
    assert observed == []  # revoked attempts are not reported to on_attempt


# 5. Saturation


def test_a_saturated_worker_leaves_due_jobs_to_other_workers(jobstore: Any) -> None:
    release = asyncio.Event()
    registry = HandlerRegistry()

    @registry.register("block")
    async def block(ctx: HandlerContext) -> None:
        await release.wait()

    turns: list[datetime] = []  # the main loop's turns, seen through its rescue calls

    def rescue(*, now: datetime, limit: int, store_clock: bool = False) -> list[str]:
        turns.append(now)
        rescued: list[str] = jobstore.rescue_expired(now=now, limit=limit, store_clock=store_clock)
        return rescued

    clock = VirtualClock(START)
    elapsed = ManualElapsed()
    scheduler = Scheduler(Faulty(jobstore, rescue_expired=rescue), clock=clock, ssrf=OPEN)
    concurrency = 2
    jobs = [NewJob(run_at=START, target=PythonTarget(handler="block")) for _ in range(40)]
    scheduler.enqueue_many(jobs)
    worker = scheduler.worker(
        handlers=registry,
        concurrency=concurrency,
        elapsed=elapsed,
        rescue_interval=timedelta(seconds=1),
        # Leases are not what this test is about: an hour keeps the watchdog out of the way
        # however slowly the store answers while elapsed time is stepped. The same for the
        # worker's session (its heartbeat on elapsed time, its rules on the database's).
        lease=timedelta(hours=1),
        session_grace=timedelta(hours=1),
        dead_after=timedelta(hours=1),
    )

    def succeeded() -> int:
        return jobstore.count_by_state().get(JobState.SUCCEEDED, 0)

    async def scenario() -> None:
        running = asyncio.create_task(worker.run())
        try:
            assert await eventually(lambda: worker.stats.started == concurrency)
            # Five more turns of the main loop, each at least a second of elapsed time later:
            # five chances to claim more, if it would. Time is stepped until the turn comes
            # (the loop may still be finishing the previous one when a step lands).
            for _ in range(5):
                seen = len(turns)
                for step in range(400):
                    elapsed.advance(1.0 if step == 0 else 0.25)
                    if await eventually(lambda: len(turns) > seen, 0.05):  # noqa: B023
                        break
                assert len(turns) > seen
            counts = await asyncio.to_thread(jobstore.count_by_state)
            # Up to a slot's worth claimed ahead while the slots were filling, no more.
            assert counts.get(JobState.RUNNING, 0) <= 2 * concurrency
            assert counts.get(JobState.SCHEDULED, 0) >= 40 - 2 * concurrency
            release.set()
            for _ in range(20_000):  # elapsed time goes on, a millisecond a step
                if await asyncio.to_thread(succeeded) == 40:
                    break
                elapsed.advance(0.001)
            assert await asyncio.to_thread(succeeded) == 40
        finally:
            release.set()
            worker.request_stop()
            elapsed.advance(worker.grace.total_seconds())
            await asyncio.wait_for(running, DEADLINE)

    asyncio.run(scenario())


# 6. Crashes


def test_a_job_claimed_by_a_worker_that_crashed_before_starting_it_still_runs(
    jobstore: Any,
) -> None:
    # kill -9 loses no job: not even one with a single attempt, claimed and never started.
    clock = VirtualClock(START)
    calls: list[int] = []
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    job = scheduler.enqueue(PythonTarget(handler="noop"), retry=ONCE)
    params = ClaimParams(
        worker_id="killed", now=START, horizon=timedelta(0), lease=timedelta(seconds=30), limit=1
    )
    assert [j.id for j in jobstore.claim_due(params)] == [job.id]
    clock.advance(timedelta(seconds=31))
    worker = scheduler.worker(handlers=noop_registry(calls))
    assert worker.drain() == 1
    assert calls == [2]
    assert scheduler.get(job.id).state is JobState.SUCCEEDED
    runs = scheduler.runs(job.id)
    assert [(r.attempt, r.outcome) for r in runs] == [
        (1, RunOutcome.LOST),
        (2, RunOutcome.SUCCEEDED),
    ]


# 7. Early timers


class SteppedClock:
    """Real time plus an offset the test sets (a wall clock stepped back by NTP, say)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)
        self.real = SystemClock()

    def now(self) -> datetime:
        return self.real.now() + self.offset


def test_a_timer_that_fires_before_the_instant_waits_for_it(jobstore: Any) -> None:
    clock = SteppedClock()
    started: list[datetime] = []
    registry = HandlerRegistry()
    registry.add("mark", lambda ctx: started.append(clock.now()), inline=True)
    scheduler = Scheduler(jobstore, clock=clock, ssrf=OPEN)
    with scheduler.running_worker(handlers=registry, horizon=timedelta(seconds=5)) as worker:
        run_at = clock.now() + timedelta(seconds=1)
        job = scheduler.enqueue(PythonTarget(handler="mark"), run_at=run_at)
        assert wait_until(lambda: worker.stats.claimed == 1)
        # The timer is armed; our clock now runs 300 ms behind the loop's.
        clock.offset = -timedelta(milliseconds=300)
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED)
    (run,) = scheduler.runs(job.id)
    assert run.started_at >= run_at, run_at - run.started_at
    assert started[0] >= run_at


# 8. Rescue batches


def test_rescue_passes_its_limit_and_goes_on_while_batches_are_full(
    jobstore: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "RESCUE_LIMIT", 2)
    limits: list[int] = []

    def rescue(*, now: datetime, limit: int, store_clock: bool = False) -> list[str]:
        limits.append(limit)
        rescued: list[str] = jobstore.rescue_expired(now=now, limit=limit, store_clock=store_clock)
        return rescued

    clock = VirtualClock(START)
    scheduler = Scheduler(Faulty(jobstore, rescue_expired=rescue), clock=clock, ssrf=OPEN)
    scheduler.enqueue_many(
        [NewJob(run_at=START, target=PythonTarget(handler="noop")) for _ in range(5)]
    )
    params = ClaimParams(
        worker_id="killed", now=START, horizon=timedelta(0), lease=timedelta(seconds=30), limit=5
    )
    assert len(jobstore.claim_due(params)) == 5
    clock.advance(timedelta(seconds=31))
    worker: Worker = scheduler.worker(handlers=noop_registry())
    assert worker.drain() == 5
    assert limits[:3] == [2, 2, 2]
    assert worker.stats.rescued == 5
