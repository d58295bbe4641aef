"""Every attempt leaves a log line with its job's fields; a missing handler is a warning."""

from __future__ import annotations

import logging
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.jobs.handlers import HandlerContext, HandlerRegistry, PermanentError
from recoup.jobs.model import BackoffPolicy, PythonTarget
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.timekeeping.clock import VirtualClock

START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
ONCE = BackoffPolicy(max_attempts=1)


def drained(store: Any, registry: HandlerRegistry) -> tuple[Scheduler, Any]:
    scheduler = Scheduler(store, clock=VirtualClock(START), ssrf=SsrfGuard(allow_private=True))
    return scheduler, scheduler.worker(handlers=registry, rng=random.Random(1))


def test_each_attempt_is_logged_with_its_job_and_outcome(
    jobstore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    registry = HandlerRegistry()

    def refuse(ctx: HandlerContext) -> None:
        raise PermanentError("card declined for good")

    registry.add("ok", lambda ctx: None)
    registry.add("refuse", refuse)
    scheduler, worker = drained(jobstore, registry)
    good = scheduler.enqueue(PythonTarget(handler="ok"), name="good", tenant="default")
    bad = scheduler.enqueue(PythonTarget(handler="refuse"), name="bad", retry=ONCE)
    with caplog.at_level(logging.INFO, logger="recoup.attempts"):
        assert worker.drain() == 2
    lines = {r.job_id: r for r in caplog.records if r.name == "recoup.attempts"}
    assert set(lines) == {good.id, bad.id}
    ok, failed = lines[good.id], lines[bad.id]
    assert (ok.levelno, ok.outcome, ok.attempt, ok.job_name, ok.tenant) == (
        logging.INFO,
        "succeeded",
        1,
        "good",
        "default",
    )
    assert (failed.levelno, failed.outcome) == (logging.WARNING, "failed")
    assert "card declined for good" in failed.error
    assert failed.getMessage() == "job bad attempt 1: failed"


def test_only_final_failures_are_logged_at_warning_level(
    jobstore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    registry = HandlerRegistry()
    registry.add("ok", lambda ctx: None)
    scheduler, worker = drained(jobstore, registry)
    scheduler.enqueue(PythonTarget(handler="ok"), name="quiet")
    with caplog.at_level(logging.WARNING, logger="recoup.attempts"):
        assert worker.drain() == 1
    assert [r for r in caplog.records if r.name == "recoup.attempts"] == []


def test_a_job_whose_handler_this_worker_lacks_is_a_warning_and_retried(
    jobstore: Any, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler, worker = drained(jobstore, HandlerRegistry())
    job = scheduler.enqueue(
        PythonTarget(handler="billing.send_receipt"),
        name="receipt-1",
        retry=BackoffPolicy(max_attempts=3, min_backoff=timedelta(seconds=1)),
    )
    with caplog.at_level(logging.WARNING, logger="recoup.worker"):
        assert worker.drain() == 1
    warnings = [r for r in caplog.records if r.name == "recoup.worker"]
    assert len(warnings) == 1
    assert "no handler named 'billing.send_receipt'" in warnings[0].getMessage()
    assert (warnings[0].job_id, warnings[0].job_name) == (job.id, "receipt-1")
    assert scheduler.runs(job.id)[0].outcome.value == "retry"
