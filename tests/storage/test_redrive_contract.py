"""Bulk redrive on both backends: the failed jobs a filter names (group, name prefix taken
literally, the time they failed, a substring of their last error), counted and redriven in the
order they failed; each redrive gives the budget a job was created with, never double the
last one; a job whose name a live job holds, or another tenant's, is left as it is."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from recoup.jobs.model import BackoffPolicy, JobState, NewJob, PythonTarget
from recoup.jobs.redrive import FailedFilter
from recoup.jobs.store import ClaimParams
from recoup.jobs.targets import AttemptOutcome, AttemptResult
from tests.storage.conftest import Store
from tests.storage.test_callbacks_store import T0, end

HOUR = timedelta(hours=1)
TARGET = PythonTarget(handler="noop")


def failed(store: Store, at: Any, error: str = "boom", **fields: Any) -> str:
    """A job of three attempts, failed for good at `at` with `error` (its first attempt)."""
    job = store.insert(
        NewJob(run_at=at, target=TARGET, retry=BackoffPolicy(max_attempts=3), **fields), now=at
    )
    [claimed] = store.claim_due(
        ClaimParams(worker_id="w1", now=at, horizon=timedelta(0), lease=HOUR, limit=1)
    )
    assert claimed.id == job.id
    result = AttemptResult(AttemptOutcome.FAILED, error=error)
    store.complete_many([end(claimed, result, at=at)], now=at)
    return job.id


def redrive(store: Store, found: FailedFilter, at: Any = T0 + 10 * HOUR) -> tuple[int, int]:
    return store.redrive_failed(found, now=at)


def test_a_filter_counts_and_redrives_only_the_failed_jobs_it_names(store: Store) -> None:
    ids = {
        "a": failed(store, T0, name="sync-a", group="g1", error="HTTP 503 from gateway"),
        "b": failed(store, T0 + HOUR, name="sync-b", group="g1", error="timeout"),
        "c": failed(store, T0 + 2 * HOUR, name="other-c", group="g1", error="HTTP 503"),
        "d": failed(store, T0 + HOUR, name="sync_d", group="g2", error="HTTP 503"),
        "e": failed(store, T0 + HOUR, name="sync-e", tenant="rival", error="HTTP 503"),
    }
    some = FailedFilter(tenant="default", group="g1", name_prefix="sync-", error="503")
    assert store.count_failed(some) == 1  # a only: b's error, c's name, d's group, e's tenant
    assert store.count_failed(FailedFilter(tenant="default", name_prefix="sync%")) == 0
    assert store.count_failed(FailedFilter(tenant="default", name_prefix="sync_")) == 1
    assert store.count_failed(FailedFilter(tenant="default", error="http")) == 0  # case
    window = FailedFilter(tenant="default", since=T0 + HOUR, until=T0 + 2 * HOUR)
    assert store.count_failed(window) == 2  # b and d: since inclusive, until exclusive
    assert redrive(store, window) == (2, 2)
    states = {k: store.get("rival" if k == "e" else "default", v).state for k, v in ids.items()}  # type: ignore[union-attr]
    assert states == {
        "a": JobState.FAILED,
        "b": JobState.SCHEDULED,
        "c": JobState.FAILED,
        "d": JobState.SCHEDULED,
        "e": JobState.FAILED,
    }
    assert store.count_failed(window) == 0
    assert redrive(store, FailedFilter(tenant="default")) == (2, 2)  # a and c


def test_every_redrive_gives_the_budget_the_job_was_created_with(store: Store) -> None:
    job_id = failed(store, T0)
    found = FailedFilter(tenant="default")
    for n in range(1, 4):
        at = T0 + n * 10 * HOUR
        assert redrive(store, found, at) == (1, 1)
        job = store.get("default", job_id)
        assert job is not None and job.retry.max_attempts == job.attempts + 3
        # Spend the whole budget again: three failed attempts (retried, then failed for good).
        for attempt in range(3):
            [claimed] = store.claim_due(
                ClaimParams(worker_id="w1", now=at, horizon=timedelta(0), lease=HOUR, limit=1)
            )
            outcome = AttemptOutcome.RETRY if attempt < 2 else AttemptOutcome.FAILED
            store.complete_many([end(claimed, AttemptResult(outcome, error="x"), at=at)], now=at)
            at += HOUR
    final = store.get("default", job_id)
    assert final is not None and final.state is JobState.FAILED
    assert (final.attempts, final.retry.max_attempts) == (10, 10)  # 1 + 3 × 3, never doubled


def test_a_job_whose_name_a_live_job_holds_is_matched_but_not_redriven(store: Store) -> None:
    failed(store, T0, name="nightly")
    failed(store, T0 + HOUR, name="nightly")
    # Both failed jobs hold the name; one redrive takes it, so the other is left failed.
    assert redrive(store, FailedFilter(tenant="default")) == (2, 1)
