"""The behaviour suite every job and schedule store must pass, run unchanged on each backend.

Instants are fixed (time is an argument); only the concurrency tests use real threads.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recoup.errors import Conflict, InvalidInput
from recoup.jobs.model import (
    BackoffPolicy,
    Completion,
    HttpTarget,
    Job,
    JobState,
    NewJob,
    PythonTarget,
    Run,
    RunOutcome,
    Tenant,
    new_id,
)
from recoup.jobs.schedules.model import CronRule, MissedPolicy, NewSchedule, Schedule
from recoup.jobs.store import ClaimParams, JobFilter, RunFilter, ScheduleFilter
from recoup.storage.rules import lost_error
from tests.storage.conftest import Backend, Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
LEASE = timedelta(seconds=30)
TARGET = PythonTarget(handler="noop")


def job(**overrides: Any) -> NewJob:
    fields: dict[str, Any] = {"run_at": T0, "target": TARGET}
    fields.update(overrides)
    return NewJob(**fields)


def claim(
    store: Store,
    *,
    worker: str = "w1",
    now: datetime = T0,
    limit: int = 100,
    horizon: timedelta = timedelta(0),
    lease: timedelta = LEASE,
) -> list[Job]:
    return store.claim_due(
        ClaimParams(worker_id=worker, now=now, horizon=horizon, lease=lease, limit=limit)
    )


def report(
    claimed: Job,
    outcome: RunOutcome,
    *,
    worker: str | None = None,
    at: datetime = T0,
    retry_at: datetime | None = None,
    error: str | None = None,
    status_code: int | None = None,
) -> Completion:
    worker = worker or claimed.leased_by or "w1"
    run = Run(
        job_id=claimed.id,
        tenant=claimed.tenant,
        attempt=claimed.attempts,
        started_at=at,
        finished_at=at + SECOND,
        outcome=outcome,
        status_code=status_code,
        duration_ms=1000.0,
        error=error,
        worker_id=worker,
    )
    return Completion(run=run, worker_id=worker, retry_at=retry_at)


# Inserting and reading


def test_an_inserted_job_reads_back_field_for_field(store: Store) -> None:
    new = job(
        name="invoice-1",
        target=HttpTarget(
            url="https://example.com/hook",
            method="PUT",
            headers={"X-A": "1"},
            body={"amount": 1299, "currency": "EUR", "note": "café"},
        ),
        payload={"invoice": "in_1", "items": [1, 2.5, None, True]},
        idempotency_key="key-1",
        retry=BackoffPolicy(
            max_attempts=3, min_backoff=timedelta(seconds=2), max_backoff=timedelta(minutes=5)
        ),
        timeout=timedelta(seconds=12.5),
        keep_for=None,
        run_at=T0 + timedelta(microseconds=123_456),
    )
    inserted = store.insert(new, now=T0)
    assert inserted == store.get("default", new.id)
    assert inserted.id == new.id
    assert inserted.target == new.target
    assert inserted.payload == new.payload
    assert inserted.retry == new.retry
    assert inserted.timeout == new.timeout
    assert inserted.keep_for is None
    assert inserted.run_at == new.run_at
    assert inserted.state is JobState.SCHEDULED
    assert inserted.attempts == 0
    assert inserted.created_at == inserted.updated_at == T0
    assert inserted.lease_expires_at is None and inserted.finished_at is None


# JSON values as a job's payload, body and metadata carry them (no NUL: no PostgreSQL text
# holds one; metadata's own limits are `recoup.jobs.metadata`'s, tested there).
JSON_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(JSON_TEXT, inner, max_size=4),
    max_leaves=12,
)
ZONES = st.sampled_from(
    [UTC, timezone(timedelta(hours=-5)), timezone(timedelta(hours=5, minutes=45))]
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    payload=JSON_VALUES,
    body=JSON_VALUES,
    offset=st.integers(min_value=-(10**12), max_value=10**12),  # microseconds from T0
    zone=ZONES,
    timeout=st.floats(min_value=0.001, max_value=3600),
    keep_for=st.none() | st.floats(min_value=0, max_value=10**8),
    flow=st.sampled_from(["none", "flow", "ordering"]),
)
# Found by this test: a float Python writes with an exponent, which jsonb reads as an integer.
@example(
    payload=None,
    body={"big": 6.483249895288715e16},
    offset=0,
    zone=UTC,
    timeout=30.0,
    keep_for=None,
    flow="none",
)
def test_the_job_an_insert_returns_is_the_job_the_store_reads(
    store: Store,
    payload: Any,
    body: Any,
    offset: int,
    zone: timezone,
    timeout: float,
    keep_for: float | None,
    flow: str,
) -> None:
    keys: dict[str, Any] = {
        "none": {},
        "flow": {"flow_key": "k", "flow_rate": 3, "flow_parallelism": 2},
        "ordering": {"ordering_key": "o", "ordering_skip_failed": True},
    }[flow]
    new = job(
        run_at=(T0 + timedelta(microseconds=offset)).astimezone(zone),
        target=HttpTarget(url="https://example.com/hook", body=body),
        payload=payload,
        timeout=timedelta(seconds=timeout),
        keep_for=None if keep_for is None else timedelta(seconds=keep_for),
        metadata={"plan": "pro"},
        **keys,
    )
    inserted = store.insert(new, now=T0.astimezone(zone))
    assert inserted == store.get("default", new.id)
    assert inserted.run_at == new.run_at and inserted.run_at.tzinfo is UTC


def test_get_of_an_absent_job_is_none(store: Store) -> None:
    assert store.get("default", new_id()) is None


def test_a_live_name_is_unique_within_a_tenant(store: Store) -> None:
    store.insert(job(name="n"), now=T0)
    with pytest.raises(Conflict):
        store.insert(job(name="n"), now=T0)
    # Another tenant may use it.
    store.insert(job(name="n", tenant="other"), now=T0)


def test_a_running_job_still_holds_its_name(store: Store) -> None:
    store.insert(job(name="n"), now=T0)
    claim(store)
    with pytest.raises(Conflict):
        store.insert(job(name="n"), now=T0)


def test_a_finished_jobs_name_can_be_reused(store: Store) -> None:
    first = store.insert(job(name="n"), now=T0)
    store.cancel("default", first.id, now=T0)
    second = store.insert(job(name="n"), now=T0 + SECOND)
    assert second.id != first.id
    # get_by_name prefers the live job, else the most recent.
    assert store.get_by_name("default", "n") == second
    store.cancel("default", second.id, now=T0 + 2 * SECOND)
    latest = store.get_by_name("default", "n")
    assert latest is not None and latest.id == second.id
    assert store.get_by_name("default", "absent") is None


def test_an_idempotency_key_returns_the_first_job_unchanged(store: Store) -> None:
    first = store.insert(job(idempotency_key="k", payload=1), now=T0)
    again = store.insert(job(idempotency_key="k", payload=2, name="x"), now=T0 + SECOND)
    assert again == first
    # The key is per tenant.
    other = store.insert(job(idempotency_key="k", tenant="t2"), now=T0)
    assert other.id != first.id


def test_an_idempotency_key_wins_even_after_the_job_finished(store: Store) -> None:
    first = store.insert(job(idempotency_key="k"), now=T0)
    store.cancel("default", first.id, now=T0)
    again = store.insert(job(idempotency_key="k"), now=T0 + SECOND)
    assert again.id == first.id and again.state is JobState.CANCELLED


def test_a_reused_id_conflicts(store: Store) -> None:
    first = store.insert(job(), now=T0)
    with pytest.raises(Conflict):
        store.insert(job(id=first.id), now=T0)


def test_insert_many_skips_rows_that_clash_and_counts_the_rest(store: Store) -> None:
    store.insert(job(name="taken"), now=T0)
    store.insert(job(idempotency_key="used"), now=T0)
    batch = [
        job(name="taken"),  # a live name
        job(idempotency_key="used"),  # a used key
        job(name="fresh"),
        job(name="fresh"),  # a clash inside the batch
        job(idempotency_key="new"),
        job(),
    ]
    assert store.insert_many(batch, now=T0) == 3
    assert store.insert_many([], now=T0) == 0
    assert store.count_by_state("default")[JobState.SCHEDULED] == 5


def test_insert_many_of_a_large_batch_inserts_every_row(store: Store) -> None:
    jobs = [job(run_at=T0 + i * SECOND, payload={"i": i}) for i in range(2500)]
    assert store.insert_many(jobs, now=T0) == 2500
    assert store.get("default", jobs[1234].id) is not None
    assert store.next_due_at() == T0


def test_a_bulk_insert_that_clashes_still_inserts_every_other_row(store: Store) -> None:
    # Large enough for PostgreSQL's COPY path, whose fast attempt fails on the clash.
    store.insert(job(name="taken"), now=T0)
    batch = [job(payload={"i": i}) for i in range(1200)]
    batch[700] = job(name="taken")
    batch[900] = job(id=batch[10].id)
    assert store.insert_many(batch, now=T0) == 1198
    assert store.count_by_state("default")[JobState.SCHEDULED] == 1199


# Claiming


def test_claim_takes_due_jobs_in_run_at_order_up_to_the_limit(store: Store) -> None:
    late = store.insert(job(run_at=T0 + 10 * SECOND), now=T0)
    second = store.insert(job(run_at=T0 - SECOND), now=T0)
    first = store.insert(job(run_at=T0 - 2 * SECOND), now=T0)
    third = store.insert(job(run_at=T0), now=T0)
    claimed = claim(store, limit=2)
    assert [j.id for j in claimed] == [first.id, second.id]
    assert all(j.state is JobState.RUNNING and j.attempts == 1 for j in claimed)
    assert all(j.leased_by == "w1" and j.lease_expires_at == T0 + LEASE for j in claimed)
    assert [j.id for j in claim(store)] == [third.id]
    assert claim(store) == []
    assert store.next_due_at() == late.run_at


def test_claim_reaches_a_horizon_ahead_and_leases_from_the_due_instant(store: Store) -> None:
    soon = store.insert(job(run_at=T0 + 2 * SECOND), now=T0)
    store.insert(job(run_at=T0 + 10 * SECOND), now=T0)
    claimed = claim(store, horizon=5 * SECOND)
    assert [j.id for j in claimed] == [soon.id]
    # The lease runs from the instant the job will start, not from the claim.
    assert claimed[0].lease_expires_at == soon.run_at + LEASE


def test_concurrent_claimers_never_claim_a_job_twice(backend: Backend) -> None:
    stores = [backend.open() for _ in range(4)]
    stores[0].insert_many([job(run_at=T0 - i * SECOND) for i in range(400)], now=T0)
    claimed: list[tuple[str, str]] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker(index: int) -> None:
        store = stores[index % len(stores)]
        name = f"w{index}"
        start.wait()
        while True:
            got = claim(store, worker=name, limit=7)
            if not got:
                return
            with lock:
                claimed.extend((j.id, name) for j in got)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts = Counter(job_id for job_id, _ in claimed)
    assert len(counts) == 400
    assert max(counts.values()) == 1
    assert stores[0].count_by_state()[JobState.RUNNING] == 400


# Completing


def test_a_success_finishes_the_job_and_logs_the_run(store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    (claimed,) = claim(store)
    done = T0 + 2 * SECOND
    applied = store.complete_many(
        [report(claimed, RunOutcome.SUCCEEDED, status_code=200)], now=done
    )
    assert applied == [inserted.id]
    finished = store.get("default", inserted.id)
    assert finished is not None
    assert finished.state is JobState.SUCCEEDED
    assert finished.finished_at == done
    assert finished.lease_expires_at is None
    (run,) = store.runs("default", inserted.id)
    assert run.outcome is RunOutcome.SUCCEEDED and run.status_code == 200 and run.attempt == 1
    assert run.worker_id == "w1"


def test_a_retry_reschedules_at_its_instant_and_the_next_claim_counts_the_attempt(
    store: Store,
) -> None:
    inserted = store.insert(job(), now=T0)
    (claimed,) = claim(store)
    retry_at = T0 + timedelta(seconds=7)
    store.complete_many(
        [report(claimed, RunOutcome.RETRY, retry_at=retry_at, error="HTTP 503")], now=T0
    )
    again = store.get("default", inserted.id)
    assert again is not None
    assert again.state is JobState.SCHEDULED and again.run_at == retry_at
    assert again.last_error == "HTTP 503" and again.attempts == 1
    assert again.lease_expires_at is None and again.leased_by is None
    assert claim(store, now=retry_at - SECOND) == []
    (second,) = claim(store, now=retry_at)
    assert second.attempts == 2


def test_a_retry_with_attempts_spent_fails_the_job(store: Store) -> None:
    inserted = store.insert(job(retry=BackoffPolicy(max_attempts=1)), now=T0)
    (claimed,) = claim(store)
    store.complete_many(
        [report(claimed, RunOutcome.RETRY, retry_at=T0 + SECOND, error="boom")], now=T0
    )
    failed = store.get("default", inserted.id)
    assert failed is not None and failed.state is JobState.FAILED
    assert [r.outcome for r in store.runs("default", inserted.id)] == [RunOutcome.FAILED]


def test_the_run_log_keeps_one_row_per_attempt(store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    now = T0
    outcomes = [RunOutcome.RETRY, RunOutcome.RETRY, RunOutcome.SUCCEEDED]
    for outcome in outcomes:
        (claimed,) = claim(store, now=now)
        store.complete_many(
            [report(claimed, outcome, at=now, retry_at=now + SECOND, status_code=500)], now=now
        )
        now += SECOND
    runs = store.runs("default", inserted.id)
    assert [(r.attempt, r.outcome) for r in runs] == list(enumerate(outcomes, start=1))
    final = store.get("default", inserted.id)
    assert final is not None and final.state is JobState.SUCCEEDED and final.attempts == 3


def test_a_stale_workers_completion_is_refused(store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    (stale,) = claim(store, worker="old")
    later = T0 + LEASE + SECOND
    assert store.rescue_expired(now=later) == [inserted.id]
    (fresh,) = claim(store, worker="new", now=later)
    # The old worker comes back and reports its attempt: too late, nothing changes.
    assert store.complete_many([report(stale, RunOutcome.SUCCEEDED)], now=later) == []
    current = store.get("default", inserted.id)
    assert current is not None and current.state is JobState.RUNNING
    assert current.leased_by == "new" and current.attempts == 2
    # The new worker's completion applies.
    assert store.complete_many([report(fresh, RunOutcome.SUCCEEDED)], now=later) == [inserted.id]
    runs = store.runs("default", inserted.id)
    assert [(r.attempt, r.outcome) for r in runs] == [
        (1, RunOutcome.LOST),
        (2, RunOutcome.SUCCEEDED),
    ]


def test_a_completion_from_another_worker_or_attempt_is_refused(store: Store) -> None:
    store.insert(job(), now=T0)
    (claimed,) = claim(store, worker="a")
    assert store.complete_many([report(claimed, RunOutcome.SUCCEEDED, worker="b")], now=T0) == []
    wrong_attempt = Completion(
        run=Run(
            job_id=claimed.id,
            tenant="default",
            attempt=2,
            started_at=T0,
            finished_at=T0,
            outcome=RunOutcome.SUCCEEDED,
        ),
        worker_id="a",
    )
    assert store.complete_many([wrong_attempt], now=T0) == []
    # A completion applied twice (a resend) applies once.
    assert store.complete_many([report(claimed, RunOutcome.SUCCEEDED)], now=T0) == [claimed.id]
    assert store.complete_many([report(claimed, RunOutcome.SUCCEEDED)], now=T0) == []
    assert len(store.runs("default", claimed.id)) == 1


def test_a_job_cancelled_while_running_is_not_rescheduled_by_its_completion(store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    (claimed,) = claim(store)
    cancelled = store.cancel("default", inserted.id, now=T0 + SECOND)
    assert cancelled is not None and cancelled.state is JobState.CANCELLED
    assert cancelled.lease_expires_at is None
    applied = store.complete_many(
        [report(claimed, RunOutcome.RETRY, retry_at=T0 + 5 * SECOND)], now=T0 + 2 * SECOND
    )
    assert applied == []
    after = store.get("default", inserted.id)
    assert after is not None and after.state is JobState.CANCELLED
    assert claim(store, now=T0 + timedelta(hours=1)) == []
    # The attempt did happen, so the log shows it, as cancelled.
    assert [r.outcome for r in store.runs("default", inserted.id)] == [RunOutcome.CANCELLED]


def test_a_batch_of_completions_applies_each_by_compare_and_set(store: Store) -> None:
    store.insert_many([job(run_at=T0 - i * SECOND) for i in range(50)], now=T0)
    claimed = claim(store, limit=50)
    stale = claimed[0]
    store.cancel("default", claimed[1].id, now=T0)
    completions = [report(stale, RunOutcome.SUCCEEDED, worker="intruder")]
    completions += [report(j, RunOutcome.SUCCEEDED) for j in claimed[1:25]]
    completions += [
        report(j, RunOutcome.RETRY, retry_at=T0 + timedelta(minutes=1)) for j in claimed[25:]
    ]
    applied = store.complete_many(completions, now=T0 + SECOND)
    assert sorted(applied) == sorted(j.id for j in claimed[2:])
    counts = store.count_by_state("default")
    assert counts[JobState.SUCCEEDED] == 23
    assert counts[JobState.SCHEDULED] == 25
    assert counts[JobState.RUNNING] == 1
    assert counts[JobState.CANCELLED] == 1


# Leases


def test_heartbeat_extends_only_the_leases_the_worker_holds(store: Store) -> None:
    store.insert_many([job(), job()], now=T0)
    mine, theirs = claim(store, limit=1, worker="me") + claim(store, limit=1, worker="them")
    until = T0 + timedelta(minutes=5)
    held = store.heartbeat("me", [mine.id, theirs.id, new_id()], lease_until=until)
    assert held == [mine.id]
    refreshed = store.get("default", mine.id)
    assert refreshed is not None and refreshed.lease_expires_at == until
    assert store.heartbeat("me", [], lease_until=until) == []
    # A heartbeat keeps the job from rescue.
    assert store.rescue_expired(now=T0 + LEASE + SECOND) == [theirs.id]


def test_heartbeat_with_attempts_extends_only_the_attempt_still_running(store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    (first,) = claim(store, worker="me")
    later = T0 + LEASE + SECOND
    store.rescue_expired(now=later)  # "me" stalled past its lease
    (second,) = claim(store, worker="me", now=later)  # and claimed the job again
    assert (first.attempts, second.attempts) == (1, 2)
    until = later + timedelta(minutes=5)
    stale = store.heartbeat("me", [inserted.id], lease_until=until, attempts=[1])
    assert stale == []  # the lapsed attempt is not extended: its holder must stop it
    assert store.heartbeat("me", [inserted.id], lease_until=until, attempts=[2]) == [inserted.id]
    refreshed = store.get("default", inserted.id)
    assert refreshed is not None and refreshed.lease_expires_at == until
    with pytest.raises(InvalidInput):
        store.heartbeat("me", [inserted.id], lease_until=until, attempts=[1, 2])


def test_of_two_attempts_of_one_job_in_a_batch_the_later_applies(store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    (first,) = claim(store, worker="me")
    later = T0 + LEASE + SECOND
    store.rescue_expired(now=later)
    (second,) = claim(store, worker="me", now=later)
    batch = [
        report(second, RunOutcome.SUCCEEDED, at=later),
        report(first, RunOutcome.RETRY, at=T0),  # the stale attempt, after the newer one
    ]
    assert store.complete_many(batch, now=later + SECOND) == [inserted.id]
    done = store.get("default", inserted.id)
    assert done is not None and done.state is JobState.SUCCEEDED
    runs = store.runs("default", inserted.id)
    assert [(r.attempt, r.outcome) for r in runs] == [
        (1, RunOutcome.LOST),
        (2, RunOutcome.SUCCEEDED),
    ]


def test_release_gives_back_claimed_jobs_with_their_attempt_restored(store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    (claimed,) = claim(store, worker="w")
    assert store.release("other", [claimed.id], now=T0) == 0
    assert store.release("w", [claimed.id], now=T0) == 1
    back = store.get("default", inserted.id)
    assert back is not None
    assert back.state is JobState.SCHEDULED and back.attempts == 0 and back.run_at == T0
    assert back.lease_expires_at is None and back.leased_by is None
    assert store.runs("default", inserted.id) == []
    assert [j.attempts for j in claim(store, worker="w2")] == [1]


def test_an_expired_lease_is_rescued_with_a_lost_run(store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    claim(store, worker="crashed")
    assert store.rescue_expired(now=T0 + LEASE) == []  # expires after, not at, its instant
    later = T0 + LEASE + SECOND
    assert store.rescue_expired(now=later) == [inserted.id]
    assert store.rescue_expired(now=later) == []
    rescued = store.get("default", inserted.id)
    assert rescued is not None
    assert rescued.state is JobState.SCHEDULED and rescued.run_at == later
    assert rescued.attempts == 1 and rescued.lease_expires_at is None
    assert rescued.last_error == lost_error("crashed")
    (run,) = store.runs("default", inserted.id)
    assert run.outcome is RunOutcome.LOST and run.worker_id == "crashed" and run.attempt == 1
    assert run.error == lost_error("crashed")
    assert run.started_at == T0 and run.finished_at == later  # the attempt's start, to now
    assert run.duration_ms == (later - T0) / timedelta(milliseconds=1)


def test_a_lost_attempt_never_consumes_the_last_attempt(store: Store) -> None:
    # A worker killed before it started its claimed job must not fail that job.
    inserted = store.insert(job(retry=BackoffPolicy(max_attempts=1)), now=T0)
    claim(store, worker="crashed")
    later = T0 + timedelta(hours=1)
    assert store.rescue_expired(now=later) == [inserted.id]
    rescued = store.get("default", inserted.id)
    assert rescued is not None and rescued.state is JobState.SCHEDULED
    assert rescued.attempts == 1 and rescued.retry.max_attempts == 2  # one more attempt
    (again,) = claim(store, now=later)
    assert again.attempts == 2  # attempt numbers are never reused
    assert store.complete_many([report(again, RunOutcome.RETRY, at=later)], now=later) == [
        inserted.id
    ]
    failed = store.get("default", inserted.id)
    assert failed is not None and failed.state is JobState.FAILED  # a real attempt counts
    runs = store.runs("default", inserted.id)
    assert [(r.attempt, r.outcome) for r in runs] == [(1, RunOutcome.LOST), (2, RunOutcome.FAILED)]


def test_a_job_lost_on_its_hundredth_attempt_fails(store: Store) -> None:
    # The ceiling of 100 attempts bounds a job that kills every worker running it.
    inserted = store.insert(job(retry=BackoffPolicy(max_attempts=100)), now=T0)
    now = T0
    for _ in range(100):
        claim(store, now=now)
        now += timedelta(hours=1)
        store.rescue_expired(now=now)
    failed = store.get("default", inserted.id)
    assert failed is not None and failed.state is JobState.FAILED
    assert failed.attempts == 100 and failed.finished_at == now
    assert len(store.runs("default", inserted.id)) == 100


def test_rescue_is_bounded_by_its_limit(store: Store) -> None:
    store.insert_many([job() for _ in range(5)], now=T0)
    claim(store)
    later = T0 + timedelta(hours=1)
    assert len(store.rescue_expired(now=later, limit=3)) == 3
    assert len(store.rescue_expired(now=later, limit=3)) == 2


def test_next_due_at_is_the_earliest_scheduled_instant(store: Store) -> None:
    assert store.next_due_at() is None
    store.insert(job(run_at=T0 + 5 * SECOND), now=T0)
    store.insert(job(run_at=T0 + 3 * SECOND, tenant="other"), now=T0)
    assert store.next_due_at() == T0 + 3 * SECOND


def test_due_backlog_counts_scheduled_jobs_due_by_now_across_tenants(store: Store) -> None:
    assert store.due_backlog(T0) == 0
    store.insert_many(
        [
            job(run_at=T0 - SECOND),
            job(run_at=T0, tenant="other"),  # due exactly now counts
            job(run_at=T0 + SECOND),  # not due yet
            job(run_at=T0 - 2 * SECOND),
            job(run_at=T0 - 3 * SECOND),
        ],
        now=T0 - 5 * SECOND,
    )
    assert store.due_backlog(T0) == 4
    claim(store, limit=1)  # running jobs are no longer a backlog
    cancelled = store.insert(job(run_at=T0 - SECOND, name="gone"), now=T0)
    store.cancel("default", cancelled.id, now=T0)  # nor are final ones
    assert store.due_backlog(T0) == 3
    assert store.due_backlog(T0 + SECOND) == 4


def test_count_by_tenant_counts_each_tenants_states_apart(store: Store) -> None:
    assert store.count_by_tenant() == {}
    store.insert_many(
        [job(), job(), job(tenant="other"), job(tenant="third", run_at=T0 + SECOND)],
        now=T0,
    )
    (claimed, *_) = claim(store, limit=1)
    store.complete_many([report(claimed, RunOutcome.SUCCEEDED)], now=T0)
    counts = store.count_by_tenant()
    assert set(counts) == {"default", "other", "third"}
    assert counts["third"] == {JobState.SCHEDULED: 1}
    assert sum(counts[claimed.tenant].values()) == (2 if claimed.tenant == "default" else 1)
    assert counts[claimed.tenant][JobState.SUCCEEDED] == 1
    assert sum(n for states in counts.values() for n in states.values()) == 4


# Cancelling


def test_cancel_is_idempotent_and_scoped_to_the_tenant(store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    assert store.cancel("other", inserted.id, now=T0) is None
    assert store.cancel("default", new_id(), now=T0) is None
    first = store.cancel("default", inserted.id, now=T0 + SECOND)
    assert first is not None and first.state is JobState.CANCELLED
    assert first.finished_at == T0 + SECOND
    again = store.cancel("default", inserted.id, now=T0 + 2 * SECOND)
    assert again == first


def test_cancel_of_unstarted_work_only_leaves_a_running_job_to_finish(store: Store) -> None:
    running = store.insert(job(name="in-flight"), now=T0)
    (claimed,) = claim(store)
    waiting = store.insert(job(name="later", run_at=T0 + timedelta(days=1)), now=T0)
    left = store.cancel("default", running.id, now=T0 + SECOND, begun=False)
    assert left is not None and left.state is JobState.RUNNING
    held = store.heartbeat(
        "w1", [claimed.id], lease_until=T0 + 30 * SECOND, attempts=[claimed.attempts]
    )
    assert held == [claimed.id]  # its worker still holds it: nothing interrupts the attempt
    cancelled = store.cancel("default", waiting.id, now=T0 + SECOND, begun=False)
    assert cancelled is not None and cancelled.state is JobState.CANCELLED
    assert store.cancel("default", new_id(), now=T0, begun=False) is None


def test_cancel_leaves_a_finished_job_unchanged(store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    (claimed,) = claim(store)
    store.complete_many([report(claimed, RunOutcome.SUCCEEDED)], now=T0)
    done = store.cancel("default", inserted.id, now=T0 + SECOND)
    assert done is not None and done.state is JobState.SUCCEEDED


def test_cancel_by_name_and_by_prefix_cancel_live_jobs_only(store: Store) -> None:
    store.insert(job(name="retry:inv_1:1"), now=T0)
    store.insert(job(name="retry:inv_1:2", run_at=T0 + timedelta(days=3)), now=T0)
    store.insert(job(name="retry:inv_10:1"), now=T0)
    store.insert(job(name="retry:inv_1:1", tenant="other"), now=T0)
    store.insert(job(name="retry%inv_1:x"), now=T0)  # LIKE wildcards are literal
    claim(store, limit=1)  # a running job is live and is cancelled too
    assert store.cancel_by_prefix("default", "retry:inv_1:", now=T0) == 2
    assert store.cancel_by_prefix("default", "retry:inv_1:", now=T0) == 0
    assert store.cancel_by_name("default", "retry:inv_10:1", now=T0) == 1
    assert store.cancel_by_name("default", "retry:inv_10:1", now=T0) == 0
    counts = store.count_by_state("default")
    assert counts[JobState.CANCELLED] == 3
    assert counts[JobState.SCHEDULED] == 1  # the literal-% name
    assert store.count_by_state("other")[JobState.SCHEDULED] == 1


# Listing and counting


def test_list_filters_by_state_name_prefix_and_schedule(store: Store) -> None:
    a = store.insert(job(name="a:1"), now=T0)
    b = store.insert(job(name="a:2"), now=T0 + SECOND)
    c = store.insert(job(name="b:1", schedule_id="s1"), now=T0 + 2 * SECOND)
    store.insert(job(name="a:3", tenant="other"), now=T0)
    store.cancel("default", b.id, now=T0)

    def ids(**filters: Any) -> list[str]:
        page = store.list_jobs(JobFilter(tenant="default", **filters))
        return [j.id for j in page.jobs]

    assert ids() == [c.id, b.id, a.id]  # newest first
    assert ids(state=JobState.SCHEDULED) == [c.id, a.id]
    assert ids(name_prefix="a:") == [b.id, a.id]
    assert ids(schedule_id="s1") == [c.id]
    assert ids(name_prefix="a:", state=JobState.CANCELLED) == [b.id]
    assert ids(name="a:1") == [a.id]  # exact: "a:1" does not reach "a:10"
    assert ids(name="a:") == []
    assert ids(name="a:2", state=JobState.SCHEDULED) == []


def test_listing_one_name_pages_through_its_jobs_newest_first(store: Store) -> None:
    # A name is unique among live jobs only: finished jobs of that name stay listed under it.
    first = store.insert(job(name="nightly"), now=T0)
    store.cancel("default", first.id, now=T0)
    second = store.insert(job(name="nightly"), now=T0 + SECOND)
    store.insert(job(name="nightly-2"), now=T0 + 2 * SECOND)
    page = store.list_jobs(JobFilter(tenant="default", name="nightly", limit=1))
    assert [j.id for j in page.jobs] == [second.id] and page.next_cursor is not None
    rest = store.list_jobs(
        JobFilter(tenant="default", name="nightly", limit=1, cursor=page.next_cursor)
    )
    assert [j.id for j in rest.jobs] == [first.id] and rest.next_cursor is None


def test_a_run_log_pages_first_attempt_first(store: Store) -> None:
    inserted = store.insert(job(retry=BackoffPolicy(max_attempts=5)), now=T0)
    now = T0
    for _ in range(4):  # four retries, then a success: five runs
        (claimed,) = claim(store, now=now)
        store.complete_many([report(claimed, RunOutcome.RETRY, at=now, retry_at=now)], now=now)
        now += SECOND
    (last,) = claim(store, now=now)
    store.complete_many([report(last, RunOutcome.SUCCEEDED, at=now)], now=now)
    attempts: list[int] = []
    cursor = None
    pages = 0
    while True:
        page = store.list_runs(
            RunFilter(tenant="default", job_id=inserted.id, limit=2, cursor=cursor)
        )
        assert len(page.runs) <= 2
        attempts += [r.attempt for r in page.runs]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert attempts == [r.attempt for r in store.runs("default", inserted.id)] == [1, 2, 3, 4, 5]
    assert pages == 3
    other_tenant = RunFilter(tenant="other", job_id=inserted.id)
    assert store.list_runs(other_tenant).runs == []


@pytest.mark.parametrize(
    "query",
    [
        RunFilter(tenant="default", job_id="j", cursor="1:x"),  # a job listing's cursor
        RunFilter(tenant="default", job_id="j", limit=0),
        RunFilter(tenant="default", job_id="j", limit=1001),
    ],
)
def test_a_run_page_refuses_a_foreign_cursor_or_limit(store: Store, query: RunFilter) -> None:
    with pytest.raises(InvalidInput) as refused:
        store.list_runs(query)
    assert refused.value.field in ("cursor", "limit")


def test_a_foreign_cursor_is_invalid_input(store: Store) -> None:
    with pytest.raises(InvalidInput):
        store.list_jobs(JobFilter(tenant="default", cursor="not a cursor!"))


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    creations=st.lists(st.integers(min_value=0, max_value=5), min_size=0, max_size=40),
    page_size=st.integers(min_value=1, max_value=7),
)
def test_pagination_visits_every_job_once_in_order(
    store: Store, creations: list[int], page_size: int
) -> None:
    # Many jobs share a created_at instant, so the id must break ties for the cursor.
    tenant = f"t-{new_id()}"
    jobs = [job(tenant=tenant) for _ in creations]
    for new, offset in zip(jobs, creations, strict=True):
        store.insert(new, now=T0 + offset * SECOND)
    seen: list[Job] = []
    cursor = None
    while True:
        page = store.list_jobs(JobFilter(tenant=tenant, limit=page_size, cursor=cursor))
        assert len(page.jobs) <= page_size
        seen.extend(page.jobs)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(j.id for j in seen) == sorted(j.id for j in jobs)
    keys = [(j.created_at, j.id) for j in seen]
    assert keys == sorted(keys, reverse=True)


def test_count_by_state_counts_every_state(store: Store) -> None:
    store.insert_many([job(), job(), job(), job(tenant="other", run_at=T0 + SECOND)], now=T0)
    first, _second = claim(store, limit=2)
    store.complete_many([report(first, RunOutcome.FAILED)], now=T0)
    assert store.count_by_state("default") == {
        JobState.SCHEDULED: 1,
        JobState.RUNNING: 1,
        JobState.SUCCEEDED: 0,
        JobState.FAILED: 1,
        JobState.CANCELLED: 0,
    }
    assert store.count_by_state()[JobState.SCHEDULED] == 2
    assert sum(store.count_by_state().values()) == 4


def test_count_live_counts_scheduled_and_running_jobs_of_every_tenant(store: Store) -> None:
    assert store.count_live() == {JobState.SCHEDULED: 0, JobState.RUNNING: 0}
    store.insert_many([job(), job(), job(), job(tenant="other", run_at=T0 + SECOND)], now=T0)
    first, _second = claim(store, limit=2)
    store.complete_many([report(first, RunOutcome.SUCCEEDED)], now=T0)
    assert store.count_live() == {JobState.SCHEDULED: 2, JobState.RUNNING: 1}


def test_count_live_reads_the_partial_indexes_not_the_table(backend: Backend) -> None:
    # What keeps a metrics scrape cheap with millions of finished rows: each count can be
    # served by its state's partial index (PostgreSQL is told to avoid sequential scans, which
    # it would rightly prefer on this test's tiny table).
    backend.open()  # migrated
    plan = backend.plan("count_live")
    assert "jobs_due" in plan and "jobs_leases" in plan, plan
    assert "Seq Scan" not in plan and not any(
        line.endswith("SCAN jobs") for line in plan.split("\n")
    )


# Tenants


def test_another_tenants_jobs_are_invisible(store: Store) -> None:
    mine = store.insert(job(name="x"), now=T0)
    assert store.get("other", mine.id) is None
    assert store.get_by_name("other", "x") is None
    assert store.list_jobs(JobFilter(tenant="other")).jobs == []
    assert store.cancel("other", mine.id, now=T0) is None
    assert store.cancel_by_name("other", "x", now=T0) == 0
    assert store.cancel_by_prefix("other", "x", now=T0) == 0
    (claimed,) = claim(store)
    store.complete_many([report(claimed, RunOutcome.SUCCEEDED)], now=T0)
    assert store.runs("other", mine.id) == []
    assert sum(store.count_by_state("other").values()) == 0


def test_ensure_tenant_keeps_the_first_record(store: Store) -> None:
    first = Tenant(id="acme", name="Acme", signing_secret="whsec_AAAA", created_at=T0)
    assert store.ensure_tenant(first) == first
    second = Tenant(id="acme", name="Other", signing_secret="whsec_BBBB", created_at=T0 + SECOND)
    assert store.ensure_tenant(second) == first
    assert store.get_tenant("acme") == first
    assert store.get_tenant("nobody") is None


# Retention


def test_prune_deletes_finished_jobs_past_their_keep_for(store: Store) -> None:
    kept_a_day = store.insert(job(keep_for=timedelta(days=1)), now=T0)
    forever = store.insert(job(keep_for=None), now=T0)
    at_once = store.insert(job(keep_for=timedelta(0)), now=T0)
    live = store.insert(job(keep_for=timedelta(0), run_at=T0 + timedelta(days=30)), now=T0)
    for claimed in claim(store, limit=3):
        store.complete_many([report(claimed, RunOutcome.SUCCEEDED)], now=T0)
    week = timedelta(days=7)

    result = store.prune(now=T0 + SECOND, keep_runs_for=week)
    assert (result.jobs, result.runs) == (1, 0)
    assert store.get("default", at_once.id) is None
    # A job deleted at once keeps its run log for the runs' retention period.
    assert [r.outcome for r in store.runs("default", at_once.id)] == [RunOutcome.SUCCEEDED]

    result = store.prune(now=T0 + timedelta(days=2), keep_runs_for=week)
    assert (result.jobs, result.runs) == (1, 0)
    assert store.get("default", kept_a_day.id) is None
    assert store.get("default", forever.id) is not None
    assert store.get("default", live.id) is not None

    result = store.prune(now=T0 + timedelta(days=8), keep_runs_for=week)
    assert (result.jobs, result.runs) == (0, 3)
    assert store.runs("default", at_once.id) == []
    assert len(store.list_jobs(JobFilter(tenant="default")).jobs) == 2


def test_prune_deletes_in_bounded_batches(store: Store) -> None:
    store.insert_many([job(keep_for=timedelta(0)) for _ in range(7)], now=T0)
    for claimed in claim(store):
        store.complete_many([report(claimed, RunOutcome.FAILED)], now=T0)
    later = T0 + timedelta(days=30)
    assert store.prune(now=later, keep_runs_for=SECOND, limit=4).jobs == 4
    assert store.prune(now=later, keep_runs_for=SECOND, limit=4).jobs == 3
    assert store.prune(now=later, keep_runs_for=SECOND, limit=4).jobs == 0


# Waking workers


def test_an_insert_elsewhere_wakes_a_waiting_worker(backend: Backend) -> None:
    waiter, writer = backend.open(), backend.open()
    assert waiter.wait_for_notify(0.05) is False
    woke: list[bool] = []
    ready = threading.Event()

    def wait() -> None:
        ready.set()
        woke.append(waiter.wait_for_notify(60.0))

    thread = threading.Thread(target=wait)
    thread.start()
    ready.wait()
    # `ready` is set just before the wait begins: an insert in between may go unseen, so
    # insert until one lands during the wait, however late the thread runs on a busy machine.
    deadline = time.monotonic() + 30.0
    while thread.is_alive() and time.monotonic() < deadline:
        writer.insert(job(), now=T0)
        thread.join(timeout=0.2)
    thread.join(timeout=30.0)
    assert woke == [True]


def test_closing_a_store_ends_a_wait_promptly(backend: Backend) -> None:
    waiter = backend.open()
    waiter.wait_for_notify(0.01)  # the listener exists before the wait under test
    ended = threading.Event()

    def wait() -> None:
        waiter.wait_for_notify(30.0)
        ended.set()

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.1)
    waiter.close()
    assert ended.wait(5.0)
    thread.join()


# Schedules


def schedule(**overrides: Any) -> NewSchedule:
    fields: dict[str, Any] = {
        "name": "nightly",
        "rule": CronRule(expression="30 2 * * *", timezone="America/New_York"),
        "target": HttpTarget(url="https://example.com/cron"),
        "missed": MissedPolicy.RUN_ONCE,
    }
    fields.update(overrides)
    return NewSchedule(**fields)


def occurrence(schedule_id: str, at: datetime) -> NewJob:
    return job(schedule_id=schedule_id, run_at=at, name=f"nightly@{at.isoformat()}")


def test_a_schedule_reads_back_and_its_name_is_unique_while_it_exists(store: Store) -> None:
    new = schedule(payload={"a": 1}, retry=BackoffPolicy(max_attempts=2))
    created = store.insert_schedule(new, next_fire_at=T0, now=T0)
    assert created == store.get_schedule("default", new.id)
    assert created.rule == new.rule and created.target == new.target
    assert created.payload == {"a": 1} and created.retry == new.retry
    assert created.missed is MissedPolicy.RUN_ONCE
    assert created.next_fire_at == T0 and not created.paused and not created.deleted
    with pytest.raises(Conflict):
        store.insert_schedule(schedule(), next_fire_at=T0, now=T0)
    store.insert_schedule(schedule(tenant="other"), next_fire_at=T0, now=T0)
    assert [s.id for s in live_schedules(store)] == [new.id]
    assert store.get_schedule("other", new.id) is None
    # Once deleted, the name is free again.
    assert store.delete_schedule("default", new.id, now=T0) is True
    assert store.delete_schedule("default", new.id, now=T0) is False
    store.insert_schedule(schedule(), next_fire_at=T0, now=T0)


def live_schedules(store: Store, **filters: Any) -> list[Schedule]:
    return store.list_schedules(ScheduleFilter(tenant="default", **filters)).schedules


def test_schedules_list_by_name_filtered_by_paused_and_name(store: Store) -> None:
    names = ["b-weekly", "a-nightly", "c-monthly", "a-nightly-2"]
    made = {n: store.insert_schedule(schedule(name=n), next_fire_at=T0, now=T0) for n in names}
    store.insert_schedule(schedule(name="a-other-tenant", tenant="other"), next_fire_at=T0, now=T0)
    store.set_schedule_paused("default", made["c-monthly"].id, paused=True, now=T0)
    store.delete_schedule("default", made["b-weekly"].id, now=T0)  # deleted: never listed

    def listed(**filters: Any) -> list[str]:
        return [s.name for s in live_schedules(store, **filters)]

    assert listed() == ["a-nightly", "a-nightly-2", "c-monthly"]
    assert listed(paused=True) == ["c-monthly"]
    assert listed(paused=False) == ["a-nightly", "a-nightly-2"]
    assert listed(name="a-nightly") == ["a-nightly"]  # exact, not a prefix
    assert listed(name="a-nightly", paused=True) == []
    assert listed(name="b-weekly") == []


@settings(max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(min_value=0, max_value=9), page_size=st.integers(min_value=1, max_value=4))
def test_schedule_pages_visit_every_schedule_once_by_name(
    store: Store, count: int, page_size: int
) -> None:
    tenant = f"t-{new_id()}"
    names = sorted(f"s{i}-{new_id()}" for i in range(count))
    for name in reversed(names):
        store.insert_schedule(schedule(name=name, tenant=tenant), next_fire_at=T0, now=T0)
    seen: list[str] = []
    cursor = None
    while True:
        page = store.list_schedules(ScheduleFilter(tenant=tenant, limit=page_size, cursor=cursor))
        assert len(page.schedules) <= page_size
        seen += [s.name for s in page.schedules]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == names


def test_a_schedule_page_refuses_a_limit_out_of_bounds(store: Store) -> None:
    for limit in (0, 1001):
        with pytest.raises(InvalidInput) as refused:
            store.list_schedules(ScheduleFilter(tenant="default", limit=limit))
        assert refused.value.field == "limit"


def test_deleting_a_schedule_cancels_its_live_jobs(store: Store) -> None:
    created = store.insert_schedule(schedule(), next_fire_at=T0, now=T0)
    assert store.advance_schedule(
        created.id,
        expected_next=T0,
        new_next=T0 + timedelta(days=1),
        jobs=[occurrence(created.id, T0)],
        now=T0,
    )
    assert store.delete_schedule("default", created.id, now=T0 + SECOND)
    gone = store.get_schedule("default", created.id)
    assert gone is not None and gone.deleted
    assert live_schedules(store) == []
    assert store.count_by_state("default")[JobState.CANCELLED] == 1
    assert store.due_schedules(now=T0 + timedelta(days=9), horizon=SECOND, limit=10) == []


def test_pause_and_resume(store: Store) -> None:
    created = store.insert_schedule(schedule(), next_fire_at=T0, now=T0)
    paused = store.set_schedule_paused("default", created.id, paused=True, now=T0)
    assert paused is not None and paused.paused and paused.next_fire_at == T0
    assert store.due_schedules(now=T0, horizon=SECOND, limit=10) == []
    resumed_at = T0 + timedelta(days=3)
    resumed = store.set_schedule_paused(
        "default", created.id, paused=False, now=resumed_at, next_fire_at=resumed_at
    )
    assert resumed is not None and not resumed.paused and resumed.next_fire_at == resumed_at
    assert store.set_schedule_paused("other", created.id, paused=True, now=T0) is None


def test_due_schedules_are_active_and_due_within_the_horizon(store: Store) -> None:
    due = store.insert_schedule(schedule(name="a"), next_fire_at=T0, now=T0)
    soon = store.insert_schedule(schedule(name="b"), next_fire_at=T0 + 5 * SECOND, now=T0)
    store.insert_schedule(schedule(name="c"), next_fire_at=T0 + timedelta(hours=1), now=T0)
    store.insert_schedule(schedule(name="ended"), next_fire_at=None, now=T0)
    found = store.due_schedules(now=T0, horizon=10 * SECOND, limit=10)
    assert [s.id for s in found] == [due.id, soon.id]
    assert [s.id for s in store.due_schedules(now=T0, horizon=10 * SECOND, limit=1)] == [due.id]


def test_advance_schedule_is_a_compare_and_set(store: Store) -> None:
    created = store.insert_schedule(schedule(), next_fire_at=T0, now=T0)
    next_day = T0 + timedelta(days=1)
    jobs = [occurrence(created.id, T0)]
    assert store.advance_schedule(
        created.id, expected_next=T0, new_next=next_day, jobs=jobs, now=T0
    )
    assert not store.advance_schedule(
        created.id, expected_next=T0, new_next=next_day, jobs=jobs, now=T0
    )
    current = store.get_schedule("default", created.id)
    assert current is not None and current.next_fire_at == next_day
    # An occurrence that exists already is skipped, not duplicated.
    assert store.advance_schedule(
        created.id,
        expected_next=next_day,
        new_next=None,
        jobs=[job(schedule_id=created.id, run_at=T0), occurrence(created.id, next_day)],
        now=T0,
    )
    page = store.list_jobs(JobFilter(tenant="default", schedule_id=created.id))
    assert sorted(j.run_at for j in page.jobs) == [T0, next_day]
    ended = store.get_schedule("default", created.id)
    assert ended is not None and ended.next_fire_at is None


def test_advance_schedule_refuses_jobs_of_another_schedule(store: Store) -> None:
    created = store.insert_schedule(schedule(), next_fire_at=T0, now=T0)
    with pytest.raises(InvalidInput):
        store.advance_schedule(
            created.id, expected_next=T0, new_next=None, jobs=[occurrence("x", T0)], now=T0
        )


def test_two_schedulers_racing_create_each_occurrence_once(backend: Backend) -> None:
    stores = [backend.open() for _ in range(2)]
    created = stores[0].insert_schedule(schedule(), next_fire_at=T0, now=T0)
    wins: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(6)

    def scheduler(index: int) -> None:
        store = stores[index % 2]
        start.wait()
        for day in range(10):
            at = T0 + timedelta(days=day)
            won = store.advance_schedule(
                created.id,
                expected_next=at,
                new_next=at + timedelta(days=1),
                jobs=[occurrence(created.id, at)],
                now=at,
            )
            with lock:
                wins.append(won)

    threads = [threading.Thread(target=scheduler, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    page = stores[0].list_jobs(JobFilter(tenant="default", schedule_id=created.id, limit=100))
    run_ats = sorted(j.run_at for j in page.jobs)
    # Every advance that won created its day's job; no day has two.
    assert len(run_ats) == len(set(run_ats)) == wins.count(True)
    assert run_ats == [T0 + timedelta(days=d) for d in range(len(run_ats))]


def _two_running_occurrences(store: Store) -> tuple[str, list[Job]]:
    created = store.insert_schedule(schedule(), next_fire_at=T0, now=T0)
    next_minute = T0 + timedelta(minutes=1)
    store.advance_schedule(
        created.id,
        expected_next=T0,
        new_next=None,
        jobs=[occurrence(created.id, T0), occurrence(created.id, next_minute)],
        now=T0,
    )
    claimed = claim(store, now=next_minute)
    assert len(claimed) == 2
    return created.id, claimed


def test_two_occurrences_of_a_schedule_can_be_rescued_at_one_instant(store: Store) -> None:
    # Rescue moves run_at to now: both occurrences then share one run_at.
    schedule_id, claimed = _two_running_occurrences(store)
    later = T0 + timedelta(hours=1)
    assert sorted(store.rescue_expired(now=later)) == sorted(j.id for j in claimed)
    page = store.list_jobs(JobFilter(tenant="default", schedule_id=schedule_id))
    assert [(j.state, j.run_at) for j in page.jobs] == [(JobState.SCHEDULED, later)] * 2


def test_two_occurrences_of_a_schedule_can_retry_at_one_instant(store: Store) -> None:
    schedule_id, claimed = _two_running_occurrences(store)
    retry_at = T0 + timedelta(minutes=5)
    completions = [report(j, RunOutcome.RETRY, retry_at=retry_at) for j in claimed]
    assert sorted(store.complete_many(completions, now=T0)) == sorted(j.id for j in claimed)
    page = store.list_jobs(JobFilter(tenant="default", schedule_id=schedule_id))
    assert [(j.state, j.run_at) for j in page.jobs] == [(JobState.SCHEDULED, retry_at)] * 2


def test_an_occurrence_is_its_first_instant_whatever_its_retries_move(store: Store) -> None:
    # The retried 12:00 occurrence now runs at 12:01; 12:01's own occurrence is still new, and
    # 12:00's is still taken.
    created = store.insert_schedule(schedule(), next_fire_at=T0, now=T0)
    store.advance_schedule(
        created.id, expected_next=T0, new_next=None, jobs=[occurrence(created.id, T0)], now=T0
    )
    (first,) = claim(store)
    next_minute = T0 + timedelta(minutes=1)
    store.complete_many([report(first, RunOutcome.RETRY, retry_at=next_minute)], now=T0)
    assert store.insert_many([occurrence(created.id, next_minute)], now=T0) == 1
    assert store.insert_many([job(schedule_id=created.id, run_at=T0)], now=T0) == 0
    with pytest.raises(Conflict):
        store.insert(job(schedule_id=created.id, run_at=T0), now=T0)


# Migrations


def _check_reopen(factory: Callable[[], Store]) -> None:
    again = factory()
    try:
        assert again.migrate() == again.migrate()
    finally:
        again.close()


def test_migrating_twice_changes_nothing(empty_backend: Backend) -> None:
    store = empty_backend.open()
    version = store.migrate()
    assert version >= 1
    assert store.migrate() == version
    _check_reopen(empty_backend.open)


# The declared schema of migrations 0001, 0003, 0005 and 0006 (0002's tables are declared in
# tests/api/test_api_tables_schema.py): tables, columns and indexes every backend must have
# after migrating an empty database. Later migrations may add tables; these must stay as they
# are unless a migration says otherwise (update this declaration with it).
DECLARED_COLUMNS = {
    "schema_version": {"version", "name", "applied_at"},
    "tenants": {
        "id",
        "name",
        "signing_secret",
        "created_at",
        "disabled_at",  # 0007
        "previous_signing_secret",  # 0007
        "previous_secret_until",  # 0007
    },
    "jobs": {
        "id",
        "tenant",
        "name",
        "run_at",
        "target",
        "payload",
        "idempotency_key",
        "max_attempts",
        "min_backoff_s",
        "max_backoff_s",
        "jitter",
        "timeout_s",
        "keep_for_s",
        "schedule_id",
        "occurrence_at",
        "job_group",  # 0003
        "held",  # 0007
        "metadata",  # 0009
        "flow_key",  # 0013
        "flow_rate",  # 0013
        "flow_period_s",  # 0013
        "flow_parallelism",  # 0013
        "flow_order",  # 0013
        "flow_order_at",  # 0013
        "traceparent",  # 0014
        "tracestate",  # 0014
        "attempt_budget",  # 0014
        "state",
        "attempts",
        "lease_expires_at",
        "leased_by",
        "attempt_started_at",
        "last_error",
        "created_at",
        "updated_at",
        "finished_at",
        "expires_at",
    },
    "runs": {
        "job_id",
        "attempt",
        "tenant",
        "started_at",
        "finished_at",
        "outcome",
        "status_code",
        "duration_ms",
        "response_excerpt",
        "error",
        "worker_id",
    },
    "schedules": {
        "id",
        "tenant",
        "name",
        "rule",
        "target",
        "payload",
        "max_attempts",
        "min_backoff_s",
        "max_backoff_s",
        "jitter",
        "timeout_s",
        "missed",
        "paused",
        "next_fire_at",
        "created_at",
        "updated_at",
        "deleted_at",
        "metadata",  # 0009
        "start_at",  # 0009
        "end_at",  # 0009
        "revision",  # 0009
        "flow",  # 0013
        "traceparent",  # 0019
        "tracestate",  # 0019
    },
    # 0003: the dunning store's tables
    "invoices": {
        "tenant",
        "invoice_id",
        "customer_id",
        "amount",
        "currency",
        "failed_at",
        "timezone",
        "country",
        "decline_code",
        "advice_code",
        "card_fingerprint",
        "card_network",
        "gateway",
        "merchant_id",
        "charge_url",
        "policy",
        "state",
        "decision",
        "reason",
        "final_action",
        "recovered_by",
        "version",
        "created_at",
        "updated_at",
    },
    "invoice_attempts": {
        "tenant",
        "invoice_id",
        "attempt",
        "at",
        "state",
        "job_id",
        "decline_code",
        "advice_code",
        "reported_at",
        "timing_arm",  # 0016
        "timing_slot",  # 0016
        "timing_static_slot",  # 0016
        "timing_propensity",  # 0016
        "timing_explanation",  # 0016
        "timing_figures",  # 0016
    },
    "invoice_events": {
        "id",
        "tenant",
        "invoice_id",
        "seq",
        "type",
        "at",
        "data",
        "dispatched_at",
    },
    "dunning_settings": {
        "tenant",
        "policy_toml",
        "event_url",
        "charge_url",
        "updated_at",
        "experiment_name",  # 0005
        "experiment_policy_toml",  # 0005
        "experiment_share",  # 0005
    },
    # 0005: tagged merchant ids
    "merchant_tags": {"tenant", "merchant_id", "tag", "note", "tagged_at"},
    # 0006: worker sessions
    "workers": {"id", "host", "pid", "process_key", "started_at", "heartbeat_at"},
    # 0008: failure intake (the Stripe webhooks)
    "intake_settings": {"tenant", "stripe_webhook_secret", "default_timezone", "updated_at"},
    "intake_events": {
        "tenant",
        "provider",
        "event_id",
        "type",
        "invoice_id",
        "occurred_at",
        "claimed_at",
        "finished_at",
        "outcome",
        "answer",
    },
    # 0013: flow control per key
    "flow_keys": {"tenant", "flow_key", "next_start_at"},
    # 0010: charging through the provider inside Recoup
    "hosted_charging": {"tenant", "provider", "api_key", "updated_at"},
    "hosted_charges": {
        "tenant",
        "charge_key",
        "invoice_id",
        "attempt",
        "state",
        "provider_charge_id",
        "decline_code",
        "advice_code",
        "request_id",
        "calls",
        "created_at",
        "updated_at",
    },
    # 0011: customers' emails
    "message_settings": {
        "tenant",
        "smtp_url",
        "email_from",
        "reply_to",
        "update_card_url",
        "templates_dir",
        "allow_unsubscribe",
        "updated_at",
    },
    "emails": {
        "tenant",
        "message_key",
        "kind",
        "customer_id",
        "invoice_id",
        "send_at",
        "state",
        "job_id",
        "recipient",
        "message_id",
        "smtp_reply",
        "tries",
        "job_attempt",
        "created_at",
        "updated_at",
        "sent_at",
    },
    "payment_pages": {"tenant", "invoice_id", "url", "updated_at"},
    # 0012: customers and their renewals
    "customers": {
        "tenant",
        "customer_id",
        "email",
        "name",
        "locale",
        "access",
        "access_changed_at",
        "suppressed_at",
        "suppressed_reason",
        "updated_at",
    },
    "renewals": {
        "tenant",
        "renewal_id",
        "customer_id",
        "renews_at",
        "amount",
        "currency",
        "timezone",
        "exp_month",
        "exp_year",
        "reminder_job_id",
        "state",
        "created_at",
        "updated_at",
    },
    "ended_sessions": {"nonce", "expires_at"},  # 0015
    "auth_epoch": {"id", "epoch"},  # 0018
}
DECLARED_INDEXES = {
    "jobs": {
        "jobs_due",
        "jobs_live_name",
        "jobs_name",
        "jobs_idempotency_key",
        "jobs_schedule_occurrence",
        "jobs_leases",
        "jobs_expiry",
        "jobs_listing",
        "jobs_live_group",  # 0003
        "jobs_group",  # 0003
        "jobs_held",  # 0007
        "jobs_metadata",  # 0009
        "jobs_flow_due",  # 0013
        "jobs_flow_running",  # 0013
    },
    "tenants": {"tenants_disabled"},  # 0007
    "runs": {"runs_finished"},
    "schedules": {"schedules_live_name", "schedules_due"},
    "invoices": {
        "invoices_listing",
        "invoices_state",
        "invoices_customer",
        "invoices_card",
        "invoices_failed",  # 0005
    },
    "invoice_attempts": {
        "invoice_attempts_job",
        "invoice_attempts_scheduled",
        "invoice_attempts_reported",  # 0016
    },
    "invoice_events": {
        "invoice_events_seq",
        "invoice_events_undispatched",
        "invoice_events_type",  # 0005
    },
    "intake_events": {"intake_events_invoice", "intake_events_finished"},  # 0008
    "hosted_charges": {"hosted_charges_invoice"},  # 0010
    "emails": {"emails_invoice"},  # 0011
    "renewals": {"renewals_customer"},  # 0012
}


def test_migrating_an_empty_database_gives_the_declared_schema(empty_backend: Backend) -> None:
    backend = empty_backend
    store = backend.open()
    columns, indexes = backend.describe()
    # Besides the declared tables, a backend may keep its own (SQLite: a counter row standing
    # in for LISTEN/NOTIFY).
    expected = {**DECLARED_COLUMNS, **backend.own_tables}
    for table, declared in expected.items():
        assert columns.get(table) == declared, table
    for table, declared in DECLARED_INDEXES.items():
        assert indexes.get(table) == declared, table
    assert store.schema_version() == max(m.version for m in store.migrations())


def test_the_schema_holds_the_state_machine_invariants(backend: Backend, store: Store) -> None:
    inserted = store.insert(job(), now=T0)
    broken = [
        # running without a lease
        "UPDATE jobs SET state = 'running', leased_by = 'w', attempts = 1 WHERE id = {id}",
        # finished without finished_at
        "UPDATE jobs SET state = 'succeeded' WHERE id = {id}",
        # finished_at while live
        "UPDATE jobs SET finished_at = run_at WHERE id = {id}",
        # negative attempts, or more than allowed
        "UPDATE jobs SET attempts = -1 WHERE id = {id}",
        "UPDATE jobs SET attempts = max_attempts + 1 WHERE id = {id}",
        # scheduled with no attempt left
        "UPDATE jobs SET attempts = max_attempts WHERE id = {id}",
        # an unknown state
        "UPDATE jobs SET state = 'paused' WHERE id = {id}",
    ]
    for statement in broken:
        with pytest.raises(Exception, match=r"(?i)check|constraint"):
            backend.execute(statement.format(id=f"'{inserted.id}'"))
    assert store.get("default", inserted.id) == inserted


@pytest.mark.parametrize("payload", ["text", "", 3, 2.5, True, [1, "a", None], {"k": 'é"\\'}])
def test_payloads_of_every_json_kind_read_back_as_written(store: Store, payload: Any) -> None:
    inserted = store.insert(job(payload=payload), now=T0)
    assert inserted.payload == payload
    got = store.get(inserted.tenant, inserted.id)
    assert got is not None and got.payload == payload
    (claimed,) = claim(store)
    assert claimed.payload == payload
    assert claimed.target == TARGET


def test_run_log_text_reads_back_exactly_bar_nul(store: Store) -> None:
    store.insert(job(), now=T0)
    (claimed,) = claim(store)
    error = 'quotes " \' \\ {braces}, commas, ünïcödé 💳, "null", tab\tnewline\nNUL\x00end'
    done = report(claimed, RunOutcome.FAILED, error=error, status_code=418)
    assert store.complete_many([done], now=T0) == [claimed.id]
    (run,) = store.runs(claimed.tenant, claimed.id)
    assert run.error is not None
    assert run.error.replace("\ufffd", "\x00") == error  # NUL, which SQL text cannot hold
    assert run.status_code == 418
    assert run.outcome is RunOutcome.FAILED
    # The job's last error too, its text past the NUL included (SQLite's batch of
    # completions is JSON, whose text would end there).
    ended = store.get(claimed.tenant, claimed.id)
    assert ended is not None and ended.last_error is not None
    assert ended.last_error.replace("\ufffd", "\x00") == error
