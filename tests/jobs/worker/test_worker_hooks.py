"""The worker's `on_attempt` observer hook, and the job metrics fed through it."""

from __future__ import annotations

import logging
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import generate_latest

from recoup.jobs.handlers import HandlerContext, HandlerRegistry, PermanentError
from recoup.jobs.metrics import JobMetrics
from recoup.jobs.model import BackoffPolicy, Job, PythonTarget, Run, RunOutcome
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.worker import Worker
from recoup.timekeeping.clock import VirtualClock

START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RETRY_ONCE = BackoffPolicy(
    max_attempts=2, min_backoff=timedelta(seconds=1), max_backoff=timedelta(seconds=1)
)


def _registry() -> HandlerRegistry:
    registry = HandlerRegistry()

    @registry.register("ok", inline=True)
    def ok(ctx: HandlerContext) -> None:
        return None

    @registry.register("flaky", inline=True)
    def flaky(ctx: HandlerContext) -> None:
        if ctx.attempt < 2:
            raise RuntimeError("not yet")

    @registry.register("hopeless", inline=True)
    def hopeless(ctx: HandlerContext) -> None:
        raise PermanentError("card reported stolen")

    return registry


def _worker(store: Any, clock: VirtualClock, on_attempt: Any) -> tuple[Scheduler, Worker]:
    scheduler = Scheduler(store, clock=clock)
    worker = scheduler.worker(
        handlers=_registry(), rng=random.Random(1), on_attempt=on_attempt, prune_interval=None
    )
    return scheduler, worker


def test_on_attempt_sees_every_written_attempt_once_with_its_job_and_run(jobstore: Any) -> None:
    clock = VirtualClock(START)
    seen: list[tuple[Job, Run]] = []
    scheduler, worker = _worker(jobstore, clock, lambda job, run: seen.append((job, run)))
    ok = scheduler.enqueue(PythonTarget(handler="ok"), run_at=START + timedelta(seconds=2))
    flaky = scheduler.enqueue(PythonTarget(handler="flaky"), retry=RETRY_ONCE)
    hopeless = scheduler.enqueue(PythonTarget(handler="hopeless"))

    clock.set(START + timedelta(seconds=5))  # `ok` fires 3 s after its run_at
    assert worker.drain() == 3
    clock.advance(timedelta(seconds=10))
    assert worker.drain() == 1  # flaky's second attempt

    outcomes = sorted((job.id, run.attempt, run.outcome) for job, run in seen)
    assert outcomes == sorted(
        [
            (ok.id, 1, RunOutcome.SUCCEEDED),
            (flaky.id, 1, RunOutcome.RETRY),
            (flaky.id, 2, RunOutcome.SUCCEEDED),
            (hopeless.id, 1, RunOutcome.FAILED),
        ]
    )
    # The run the hook gets is the one the store logged; the job is as claimed.
    for job, run in seen:
        assert run.job_id == job.id
        assert run in scheduler.runs(job.id)
    ((ok_job, ok_run),) = [(j, r) for j, r in seen if j.id == ok.id]
    assert ok_job.run_at == START + timedelta(seconds=2)
    assert ok_run.started_at - ok_job.run_at == timedelta(seconds=3)


def test_an_observer_that_raises_is_logged_and_the_worker_carries_on(
    jobstore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    clock = VirtualClock(START)

    def broken(job: Job, run: Run) -> None:
        raise ValueError("observer bug")

    scheduler, worker = _worker(jobstore, clock, broken)
    jobs = [scheduler.enqueue(PythonTarget(handler="ok")) for _ in range(3)]
    with caplog.at_level(logging.ERROR, logger="recoup.worker"):
        assert worker.drain() == 3
    assert all(scheduler.runs(job.id)[-1].outcome is RunOutcome.SUCCEEDED for job in jobs)
    assert sum("on_attempt failed" in r.getMessage() for r in caplog.records) == 3


def test_job_metrics_count_attempts_and_firing_lag_through_the_hook(jobstore: Any) -> None:
    clock = VirtualClock(START)
    metrics = JobMetrics(count_by_state=jobstore.count_by_state)
    scheduler, worker = _worker(jobstore, clock, metrics.observe_attempt)
    scheduler.enqueue(PythonTarget(handler="ok"))
    scheduler.enqueue(PythonTarget(handler="flaky"), retry=RETRY_ONCE)
    clock.advance(timedelta(milliseconds=20))  # both start 20 ms late
    worker.drain()

    text = generate_latest(metrics.registry).decode()
    assert 'recoup_attempts_total{outcome="succeeded",tenant="default"} 1.0' in text
    assert 'recoup_attempts_total{outcome="retry",tenant="default"} 1.0' in text
    assert 'recoup_firing_lag_seconds_count{tenant="default"} 2.0' in text
    assert 'recoup_firing_lag_seconds_bucket{le="0.01",tenant="default"} 0.0' in text
    assert 'recoup_firing_lag_seconds_bucket{le="0.025",tenant="default"} 2.0' in text
