"""Callbacks and dead letters in the store, on both backends: the report of a job's end is
inserted in the same transaction as its final state (`Completion.callback`, built by the
worker's `completion_for`), once, and never for a retried attempt or a cancelled job; a failed
job is redriven with a fresh budget of attempts, or deleted."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.jobs.callbacks import callback_group
from recoup.jobs.model import (
    BackoffPolicy,
    Completion,
    HttpTarget,
    Job,
    JobState,
    NewJob,
    RunOutcome,
    trusted,
)
from recoup.jobs.store import ClaimParams, JobFilter
from recoup.jobs.targets import AttemptOutcome, AttemptResult
from recoup.jobs.worker.completions import completion_for
from tests.storage.conftest import Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
TARGET = HttpTarget(
    url="https://example.com/work",
    callback="https://example.com/done",
    failure_callback="https://example.com/failed",
)


def add(store: Store, *, attempts: int = 3, **overrides: Any) -> Job:
    fields: dict[str, Any] = {
        "run_at": T0,
        "target": TARGET,
        "retry": BackoffPolicy(max_attempts=attempts),
        "name": "nightly",
    }
    fields.update(overrides)
    return store.insert(NewJob(**fields), now=T0)


def claim_one(store: Store, now: datetime = T0, *, of: Job | None = None) -> Job:
    """The one job due (or, with `of`, that job among those due: reports are due too)."""
    claimed = store.claim_due(
        ClaimParams(worker_id="w1", now=now, horizon=timedelta(0), lease=60 * SECOND, limit=10)
    )
    (one,) = claimed if of is None else [c for c in claimed if c.id == of.id]
    return one


def end(claimed: Job, result: AttemptResult, at: datetime = T0) -> Completion:
    return completion_for(
        claimed,
        result,
        started_at=at,
        finished_at=at + SECOND,
        worker_id="w1",
        rng=random.Random(1),
    )


def reports(store: Store, job: Job) -> list[Job]:
    return store.list_jobs(JobFilter(tenant=job.tenant, group=callback_group(job.id))).jobs


OK = AttemptResult(AttemptOutcome.SUCCEEDED, status_code=200, response_excerpt="done")
BUSY = AttemptResult(AttemptOutcome.RETRY, status_code=503, error="HTTP 503")
GONE = AttemptResult(AttemptOutcome.FAILED, status_code=404, error="HTTP 404")


def test_a_success_commits_one_report_to_the_callback_with_the_job_final_state(
    store: Store,
) -> None:
    job = add(store)
    claimed = claim_one(store)
    assert store.complete_many([end(claimed, OK)], now=T0 + SECOND) == [job.id]
    (report,) = reports(store, job)
    assert report.state is JobState.SCHEDULED
    assert report.run_at == T0 + SECOND  # due at once: at the end of the attempt
    assert report.idempotency_key == f"callback:{job.id}:1"
    assert isinstance(report.target, HttpTarget)
    assert report.target.url == "https://example.com/done"
    assert report.target.callback is None and report.target.failure_callback is None
    assert report.target.body == {
        "type": "job.succeeded",
        "job_id": job.id,
        "name": "nightly",
        "schedule_id": None,
        "group": None,
        "url": "https://example.com/work",
        "state": "succeeded",
        "attempts": 1,
        "status_code": 200,
        "error": None,
        "response_excerpt": "done",
        "finished_at": (T0 + SECOND).isoformat(),
    }


def test_a_retried_attempt_reports_nothing_and_the_last_one_reports_the_failure(
    store: Store,
) -> None:
    job = add(store, attempts=2)
    first = claim_one(store)
    store.complete_many([end(first, BUSY)], now=T0 + SECOND)
    assert reports(store, job) == []  # retried: not an end
    second = claim_one(store, now=T0 + timedelta(hours=2))
    store.complete_many([end(second, BUSY, at=T0 + timedelta(hours=2))], now=T0)
    assert store.get(job.tenant, job.id).state is JobState.FAILED  # type: ignore[union-attr]
    (report,) = reports(store, job)
    assert isinstance(report.target, HttpTarget)
    assert report.target.url == "https://example.com/failed"
    body = report.target.body
    assert body["state"] == "failed" and body["attempts"] == 2 and body["status_code"] == 503
    assert body["error"] == "HTTP 503 (attempts spent: 2 of 2)"


def test_a_final_failure_reports_to_the_failure_callback_only(store: Store) -> None:
    job = add(store, target=replace(TARGET, callback=None))
    store.complete_many([end(claim_one(store), GONE)], now=T0)
    (report,) = reports(store, job)
    assert isinstance(report.target, HttpTarget)
    assert report.target.url == "https://example.com/failed"
    other = add(store, name="other", target=replace(TARGET, failure_callback=None))
    store.complete_many([end(claim_one(store), GONE)], now=T0)
    assert reports(store, other) == []  # no failure callback: nothing to report


def test_a_job_cancelled_while_its_attempt_ran_reports_nothing(store: Store) -> None:
    job = add(store)
    claimed = claim_one(store)
    store.cancel(job.tenant, job.id, now=T0)
    assert store.complete_many([end(claimed, OK)], now=T0) == []
    assert reports(store, job) == []


def test_the_report_and_the_final_state_are_one_transaction(store: Store) -> None:
    """A report that cannot be written (here: a timeout the schema's CHECK refuses) takes the
    job's final state with it: the job is still running, its attempt not logged, so the
    worker's retried flush (or the rescue) writes both or neither."""
    job = add(store)
    claimed = claim_one(store)
    completion = end(claimed, OK)
    assert completion.callback is not None
    broken = trusted(
        NewJob, {**completion.callback.__dict__, "timeout": timedelta(0)}
    )  # bypasses NewJob's own check, as a bug would
    with pytest.raises(Exception):  # noqa: B017 (each driver's integrity error)
        store.complete_many([replace(completion, callback=broken)], now=T0)
    found = store.get(job.tenant, job.id)
    assert found is not None and found.state is JobState.RUNNING
    assert store.runs(job.tenant, job.id) == []
    assert reports(store, job) == []
    # The flush tried again: both land together, once.
    assert store.complete_many([completion], now=T0) == [job.id]
    assert store.complete_many([completion], now=T0) == []  # a duplicate changes nothing
    assert len(reports(store, job)) == 1


def test_a_redriven_job_runs_again_with_a_fresh_budget_and_reports_its_next_end(
    store: Store,
) -> None:
    job = add(store, attempts=2)
    store.complete_many([end(claim_one(store), GONE)], now=T0)
    later = T0 + timedelta(days=1)
    redriven = store.redrive(job.tenant, job.id, now=later)
    assert redriven is not None
    assert redriven.state is JobState.SCHEDULED and redriven.run_at == later
    assert redriven.attempts == 1 and redriven.retry.max_attempts == 3  # two more
    assert redriven.finished_at is None
    claimed = claim_one(store, now=later, of=job)
    assert claimed.attempts == 2
    store.complete_many([end(claimed, OK, at=later)], now=later)
    assert [r.attempt for r in store.runs(job.tenant, job.id)] == [1, 2]  # the log is kept
    bodies = sorted(r.target.body["type"] for r in reports(store, job))  # type: ignore[union-attr]
    assert bodies == ["job.failed", "job.succeeded"]


def test_only_a_failed_job_is_redriven(store: Store) -> None:
    job = add(store)
    assert store.redrive(job.tenant, job.id, now=T0) is None
    unchanged = store.get(job.tenant, job.id)
    assert unchanged is not None and unchanged.state is JobState.SCHEDULED
    assert unchanged.retry.max_attempts == 3
    assert store.redrive(job.tenant, "no-such-job", now=T0) is None
    assert store.redrive("other-tenant", job.id, now=T0) is None


def test_a_failed_job_whose_name_a_live_job_took_is_not_redriven(store: Store) -> None:
    job = add(store)
    store.complete_many([end(claim_one(store), GONE)], now=T0)
    add(store, target=HttpTarget(url="https://example.com/work"))  # "nightly" again, live
    assert store.redrive(job.tenant, job.id, now=T0) is None
    assert store.get(job.tenant, job.id).state is JobState.FAILED  # type: ignore[union-attr]


def test_a_job_at_the_ceiling_of_attempts_is_not_redriven(store: Store) -> None:
    job = add(store, attempts=100, target=HttpTarget(url="https://example.com/work"))
    at = T0
    for _ in range(100):
        claimed = claim_one(store, now=at)
        store.complete_many([end(claimed, BUSY, at=at)], now=at)
        at += timedelta(days=2)
    assert store.get(job.tenant, job.id).state is JobState.FAILED  # type: ignore[union-attr]
    assert store.redrive(job.tenant, job.id, now=at) is None


def test_delete_failed_removes_a_failed_job_only(store: Store) -> None:
    live = add(store, name="live")
    failed = add(store, name="failed", run_at=T0 - SECOND)
    store.complete_many([end(claim_one(store, now=T0 - SECOND), GONE)], now=T0)
    assert store.delete_failed(live.tenant, live.id) is False
    assert store.delete_failed(failed.tenant, failed.id) is True
    assert store.get(failed.tenant, failed.id) is None
    assert len(store.runs(failed.tenant, failed.id)) == 1  # kept until pruned
    assert store.delete_failed(failed.tenant, failed.id) is False


def test_a_python_handler_job_has_no_callbacks(store: Store) -> None:
    from recoup.jobs.model import PythonTarget

    job = add(store, target=PythonTarget(handler="noop"))
    completion = end(claim_one(store), OK)
    assert completion.callback is None
    store.complete_many([completion], now=T0)
    assert reports(store, job) == []
    assert RunOutcome.SUCCEEDED is store.runs(job.tenant, job.id)[0].outcome


def test_each_redrive_gives_the_budget_the_job_was_created_with_never_double(
    store: Store,
) -> None:
    # Issue 24: three `recoup jobs retry` took max_attempts 3 → 6 → 12 → 24.
    job = add(store, attempts=3, target=HttpTarget(url="https://example.com/work"))
    at = T0
    budgets = []
    for _ in range(4):
        for _ in range(3):  # every attempt of the budget fails for good at the last
            claimed = claim_one(store, now=at, of=job)
            store.complete_many([end(claimed, BUSY, at=at)], now=at)
            at += timedelta(hours=2)  # past any backoff
        failed = store.get(job.tenant, job.id)
        assert failed is not None and failed.state is JobState.FAILED
        budgets.append(failed.retry.max_attempts)
        redriven = store.redrive(job.tenant, job.id, now=at)
        assert redriven is not None
    assert budgets == [3, 6, 9, 12]
    assert redriven.retry.max_attempts == 15 and redriven.attempts == 12
