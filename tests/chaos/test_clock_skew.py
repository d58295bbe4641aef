"""Clock skew, at the store, on both backends: a worker whose clock runs ahead must neither
claim a job before its instant nor take back another worker's live lease. Both fail today
(issue 24, found by this pass, not fixed): claims and rescues compare the caller's `now` (the
worker's due clock) with `run_at` and `lease_expires_at`, so a clock five minutes ahead claims
five minutes early and rescues every lease shorter than that, a run twice at once. The fix is
the database's clock for claims and rescues on a real clock (`now()` on PostgreSQL); these
tests are strict xfails until then, so the fix will flip them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recoup.jobs.model import HttpTarget, NewJob
from recoup.jobs.store import ClaimParams
from tests.storage.conftest import Store, backend, store  # noqa: F401

TARGET = HttpTarget(url="http://127.0.0.1:9/never-called")
SKEW = timedelta(minutes=5)
LEASE = timedelta(seconds=30)


def claim(store: Store, worker: str, now: datetime) -> list[str]:  # noqa: F811
    params = ClaimParams(worker_id=worker, now=now, horizon=timedelta(0), lease=LEASE, limit=10)
    return [job.id for job in store.claim_due(params)]


@pytest.mark.xfail(strict=True, reason="claims use the worker's clock, not the database's")
def test_a_worker_clock_ahead_claims_nothing_before_its_instant(store: Store) -> None:  # noqa: F811
    real = datetime.now(UTC)
    job = store.insert(NewJob(run_at=real + timedelta(minutes=2), target=TARGET), now=real)
    assert job.id not in claim(store, "ahead", real + SKEW)


@pytest.mark.xfail(strict=True, reason="rescues use the rescuer's clock, not the database's")
def test_a_worker_clock_ahead_takes_back_no_live_lease(store: Store) -> None:  # noqa: F811
    real = datetime.now(UTC)
    job = store.insert(NewJob(run_at=real, target=TARGET), now=real)
    assert claim(store, "true-clock", real) == [job.id]
    assert store.rescue_expired(now=real + SKEW) == []
