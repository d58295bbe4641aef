"""Clock skew, at the store, on both backends (issue 24). A worker on the wall clock passes its
reading with `store_clock`: what is due, its leases and the rescues are then decided by the
database's clock (ARCHITECTURE.md, 'Clock skew'), so a worker five minutes ahead claims
nothing early and takes back no live lease, one five minutes behind misses nothing due,
rescues an expired lease on time and keeps its own leases live. Without `store_clock` (virtual
time: tests, the demo, test clocks) the caller's `now` stays what decides, as before.

The worker's side (its due clock set on the database's by a measured offset, so that it fires
what it holds at the right instant too) is `tests/jobs/worker/test_worker_clock_skew.py`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recoup.jobs.model import HttpTarget, JobState, NewJob
from recoup.jobs.store import ClaimParams
from tests.storage.conftest import Store, backend, store  # noqa: F401

TARGET = HttpTarget(url="http://127.0.0.1:9/never-called")
SKEW = timedelta(minutes=5)
LEASE = timedelta(seconds=30)


def claim(
    store: Store,  # noqa: F811
    worker: str,
    now: datetime,
    *,
    store_clock: bool = True,
    lease: timedelta = LEASE,
) -> list[str]:
    params = ClaimParams(
        worker_id=worker,
        now=now,
        horizon=timedelta(0),
        lease=lease,
        limit=10,
        store_clock=store_clock,
    )
    return [job.id for job in store.claim_due(params)]


def test_a_worker_clock_ahead_claims_nothing_before_its_instant(store: Store) -> None:  # noqa: F811
    real = datetime.now(UTC)
    job = store.insert(NewJob(run_at=real + timedelta(minutes=2), target=TARGET), now=real)
    assert job.id not in claim(store, "ahead", real + SKEW)
    # The same reading taken as virtual time claims it: the flag is what makes the difference.
    assert claim(store, "virtual", real + SKEW, store_clock=False) == [job.id]


def test_a_worker_clock_ahead_takes_back_no_live_lease(store: Store) -> None:  # noqa: F811
    real = datetime.now(UTC)
    job = store.insert(NewJob(run_at=real, target=TARGET), now=real)
    assert claim(store, "true-clock", real) == [job.id]
    assert store.rescue_expired(now=real + SKEW, store_clock=True) == []
    fetched = store.get(job.tenant, job.id)
    assert fetched is not None and fetched.state is JobState.RUNNING
    assert fetched.lease_expires_at is not None
    # The lease runs from the database's clock, not the claimer's reading.
    assert abs(fetched.lease_expires_at - (real + LEASE)) < timedelta(seconds=5)


def test_a_worker_clock_behind_misses_no_due_job(store: Store) -> None:  # noqa: F811
    real = datetime.now(UTC)
    job = store.insert(NewJob(run_at=real - timedelta(seconds=1), target=TARGET), now=real)
    assert claim(store, "behind", real - SKEW) == [job.id]
    fetched = store.get(job.tenant, job.id)
    assert fetched is not None and fetched.lease_expires_at is not None
    # Its lease is not already in the past (which would let any rescuer take it at once).
    assert fetched.lease_expires_at > datetime.now(UTC) + LEASE - timedelta(seconds=5)
    assert store.rescue_expired(now=real, store_clock=True) == []


def test_a_worker_clock_behind_rescues_an_expired_lease_on_time(store: Store) -> None:  # noqa: F811
    real = datetime.now(UTC)
    job = store.insert(NewJob(run_at=real - timedelta(minutes=2), target=TARGET), now=real)
    # Claimed in virtual time 90 s ago under a 30 s lease: expired a minute ago.
    assert claim(store, "gone", real - timedelta(seconds=90), store_clock=False) == [job.id]
    assert store.rescue_expired(now=real - SKEW) == []  # its own clock: too late
    assert store.rescue_expired(now=real - SKEW, store_clock=True) == [job.id]


def test_a_heartbeat_from_a_clock_behind_keeps_its_lease_live(store: Store) -> None:  # noqa: F811
    real = datetime.now(UTC)
    job = store.insert(NewJob(run_at=real, target=TARGET), now=real)
    assert claim(store, "behind", real - SKEW) == [job.id]
    # By its own clock the extension would lie in the past: by the database's it does not.
    held = store.heartbeat("behind", [job.id], lease_for=LEASE, attempts=[1])
    assert held == [job.id]
    assert store.rescue_expired(now=real + SKEW, store_clock=True) == []
    store.heartbeat("behind", [job.id], lease_until=real - SKEW + LEASE, attempts=[1])
    assert store.rescue_expired(now=real, store_clock=True) == [job.id]  # the old bug


def test_a_heartbeat_takes_one_lease_end(store: Store) -> None:  # noqa: F811
    with pytest.raises(ValueError, match="exactly one"):
        store.heartbeat("w", ["j"], lease_until=datetime.now(UTC), lease_for=LEASE)
    with pytest.raises(ValueError, match="exactly one"):
        store.heartbeat("w", ["j"])


def test_the_store_clock_is_the_database_clock(store: Store) -> None:  # noqa: F811
    before = datetime.now(UTC)
    read = store.read_clock()
    after = datetime.now(UTC)
    assert read.tzinfo is not None
    # One machine here: the database's clock agrees with ours within the reading's precision.
    assert before - timedelta(milliseconds=2) <= read <= after + timedelta(milliseconds=2)
