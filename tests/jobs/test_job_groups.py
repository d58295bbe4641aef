"""Job groups on every backend: a job's `group` round-trips through every write and read path,
listings and cancellation match it exactly (never as a prefix), and only live jobs are
cancelled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.errors import InvalidInput
from recoup.jobs.model import Job, JobState, NewJob, PythonTarget, Tenant
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.store import ClaimParams, JobFilter
from recoup.timekeeping.clock import VirtualClock
from tests.jobs.conftest import Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
TARGET = PythonTarget(handler="noop")
GROUP = "dunning:inv_1"


def job(**overrides: Any) -> NewJob:
    fields: dict[str, Any] = {"run_at": T0, "target": TARGET}
    fields.update(overrides)
    return NewJob(**fields)


def fetched(store: Store, job_id: str, tenant: str = "default") -> Job:
    found = store.get(tenant, job_id)
    assert found is not None
    return found


def listed(store: Store, **filters: Any) -> list[str]:
    return [j.id for j in store.list_jobs(JobFilter(tenant="default", **filters)).jobs]


def test_a_group_round_trips_through_every_write_and_read(store: Store) -> None:
    one = store.insert(job(group=GROUP), now=T0)
    assert one.group == GROUP
    assert store.get("default", one.id) == one
    # insert_many: the few-rows statement and PostgreSQL's COPY path (from 16 rows)
    few = [job(group=GROUP) for _ in range(3)]
    many = [job(group="bulk") for _ in range(40)]
    assert store.insert_many(few, now=T0) == 3
    assert store.insert_many(many, now=T0) == 40
    assert {fetched(store, j.id).group for j in few} == {GROUP}
    assert {fetched(store, j.id).group for j in many} == {"bulk"}
    claimed = store.claim_due(
        ClaimParams(worker_id="w", now=T0, horizon=timedelta(0), lease=SECOND * 30, limit=100)
    )
    assert {j.group for j in claimed} == {GROUP, "bulk"}
    ungrouped = store.insert(job(), now=T0)
    assert ungrouped.group is None


def test_a_group_is_1_to_200_characters() -> None:
    assert job(group="g" * 200).group == "g" * 200
    for bad in ("", "g" * 201):
        with pytest.raises(InvalidInput) as caught:
            job(group=bad)
        assert caught.value.field == "group"


def test_listing_by_group_matches_exactly_never_as_a_prefix(store: Store) -> None:
    mine = store.insert(job(group=GROUP), now=T0)
    later = store.insert(job(group=GROUP), now=T0 + SECOND)
    store.insert(job(group=GROUP + "-x"), now=T0)  # longer, same start
    store.insert(job(group="dunning:inv_"), now=T0)  # a prefix of it
    store.insert(job(group=GROUP, tenant="other"), now=T0)
    store.insert(job(), now=T0)
    assert listed(store, group=GROUP) == [later.id, mine.id]  # newest first
    store.cancel("default", mine.id, now=T0)
    assert listed(store, group=GROUP) == [later.id, mine.id]  # finished jobs are listed too
    assert listed(store, group=GROUP, state=JobState.CANCELLED) == [mine.id]
    assert listed(store, group="dunning") == []


def test_a_group_listing_pages_with_the_cursor(store: Store) -> None:
    jobs = [store.insert(job(group=GROUP), now=T0 + i * SECOND) for i in range(5)]
    store.insert(job(group="other"), now=T0 + 2 * SECOND)
    seen: list[str] = []
    cursor = None
    while True:
        page = store.list_jobs(JobFilter(tenant="default", group=GROUP, limit=2, cursor=cursor))
        seen.extend(j.id for j in page.jobs)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [j.id for j in reversed(jobs)]


def test_cancel_group_cancels_only_the_live_jobs_of_exactly_that_group(store: Store) -> None:
    scheduled = store.insert(job(group=GROUP), now=T0)
    running = store.insert(job(group=GROUP, run_at=T0 - SECOND), now=T0)
    store.claim_due(
        ClaimParams(worker_id="w", now=T0 - SECOND, horizon=timedelta(0), lease=SECOND, limit=1)
    )
    assert fetched(store, running.id).state is JobState.RUNNING
    finished = store.insert(job(group=GROUP), now=T0)
    store.cancel("default", finished.id, now=T0)
    cousin = store.insert(job(group=GROUP + "-x"), now=T0)
    elsewhere = store.insert(job(group=GROUP, tenant="other"), now=T0)
    ungrouped = store.insert(job(), now=T0)

    assert store.cancel_group("default", GROUP, now=T0 + SECOND) == 2
    for cancelled in (scheduled, running):
        after = fetched(store, cancelled.id)
        assert after.state is JobState.CANCELLED and after.finished_at == T0 + SECOND
    assert fetched(store, finished.id).finished_at == T0  # already final: left as it was
    for untouched, tenant in ((cousin, "default"), (elsewhere, "other"), (ungrouped, "default")):
        assert fetched(store, untouched.id, tenant).state is JobState.SCHEDULED
    assert store.cancel_group("default", GROUP, now=T0 + SECOND) == 0  # nothing live is left


def test_the_scheduler_enqueues_lists_and_cancels_by_group(store: Store) -> None:
    scheduler = Scheduler(store, clock=VirtualClock(T0))
    store.ensure_tenant(Tenant(id="t", name="t", signing_secret="whsec_x", created_at=T0))
    first = scheduler.enqueue(TARGET, group=GROUP, tenant="t")
    second = scheduler.enqueue(TARGET, group=GROUP, tenant="t", delay=timedelta(days=1))
    scheduler.enqueue(TARGET, group=GROUP + "-x", tenant="t")
    assert first.group == GROUP
    page = scheduler.list_jobs(tenant="t", group=GROUP)
    assert {j.id for j in page.jobs} == {first.id, second.id}
    assert scheduler.cancel_group(GROUP, tenant="t") == 2
    assert scheduler.list_jobs(tenant="t", group=GROUP, state=JobState.SCHEDULED).jobs == []
    assert len(scheduler.list_jobs(tenant="t", group=GROUP + "-x").jobs) == 1
    with pytest.raises(InvalidInput) as caught:
        scheduler.cancel_group("", tenant="t")
    assert caught.value.field == "group"
