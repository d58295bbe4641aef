"""Metadata, PATCH of a job that has not started, and a schedule's replacement, on every
backend (migration 0009)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.errors import Conflict, InvalidInput
from recoup.jobs.changes import JobChange
from recoup.jobs.model import BackoffPolicy, HttpTarget, JobState, NewJob, PythonTarget
from recoup.jobs.schedules.model import CronRule, NewSchedule
from recoup.jobs.schedules.occurrences import occurrence_job
from recoup.jobs.store import ClaimParams, JobFilter, ScheduleFilter
from tests.storage.conftest import Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TARGET = PythonTarget(handler="noop")


def job(**overrides: Any) -> NewJob:
    fields: dict[str, Any] = {"run_at": T0, "target": TARGET}
    fields.update(overrides)
    return NewJob(**fields)


def claim(store: Store, *, now: datetime = T0) -> list[Any]:
    return store.claim_due(
        ClaimParams(
            worker_id="w1", now=now, horizon=timedelta(0), lease=timedelta(seconds=30), limit=10
        )
    )


def listed(store: Store, **filters: Any) -> set[str]:
    page = store.list_jobs(JobFilter(tenant="default", **filters))
    return {j.id for j in page.jobs}


# -- metadata ----------------------------------------------------------------------------------


def test_metadata_is_stored_and_read_back_on_insert_bulk_insert_and_claim(store: Store) -> None:
    one = store.insert(job(metadata={"order": "o_1", "region": "eu"}), now=T0)
    assert one.metadata == {"order": "o_1", "region": "eu"}
    # Over the bulk paths too (PostgreSQL's unnest below 16 rows, COPY from 16).
    bulk = [job(metadata={"n": str(i)}) for i in range(20)]
    assert store.insert_many(bulk, now=T0) == 20
    assert store.insert_many([job(metadata={"few": "yes"})], now=T0) == 1
    assert store.get("default", bulk[7].id).metadata == {"n": "7"}  # type: ignore[union-attr]
    claimed = {j.id: j.metadata for j in claim(store)}
    assert claimed[one.id] == {"order": "o_1", "region": "eu"}
    plain = store.insert(job(), now=T0)
    assert plain.metadata == {}


def test_a_metadata_filter_needs_every_pair(store: Store) -> None:
    both = store.insert(job(metadata={"order": "o_1", "region": "eu"}), now=T0)
    eu = store.insert(job(metadata={"order": "o_2", "region": "eu"}), now=T0)
    store.insert(job(metadata={"region": "us"}), now=T0)
    store.insert(job(), now=T0)
    assert listed(store, metadata={"region": "eu"}) == {both.id, eu.id}
    assert listed(store, metadata={"region": "eu", "order": "o_1"}) == {both.id}
    assert listed(store, metadata={"region": "eu", "order": "o_3"}) == set()
    assert listed(store, metadata={"missing": "x"}) == set()
    # A value is compared as a string, exactly: no prefix, no case folding.
    assert listed(store, metadata={"region": "e"}) == set()
    assert listed(store, metadata={"region": "EU"}) == set()


def test_a_metadata_filter_combines_with_the_other_filters_and_pages(store: Store) -> None:
    ids = [
        store.insert(job(metadata={"k": "v"}, group="g", run_at=T0 + timedelta(i)), now=T0).id
        for i in range(5)
    ]
    store.insert(job(metadata={"k": "w"}, group="g"), now=T0)
    assert listed(store, metadata={"k": "v"}, group="g") == set(ids)
    first = store.list_jobs(JobFilter(tenant="default", metadata={"k": "v"}, limit=3))
    assert len(first.jobs) == 3 and first.next_cursor is not None
    rest = store.list_jobs(
        JobFilter(tenant="default", metadata={"k": "v"}, limit=3, cursor=first.next_cursor)
    )
    assert {j.id for j in first.jobs + rest.jobs} == set(ids)
    assert rest.next_cursor is None


def test_keys_with_dots_and_colons_are_single_keys(store: Store) -> None:
    dotted = store.insert(job(metadata={"a.b": "1", "c:d": "2"}), now=T0)
    store.insert(job(metadata={"a": "1"}), now=T0)
    assert listed(store, metadata={"a.b": "1"}) == {dotted.id}
    assert listed(store, metadata={"c:d": "2"}) == {dotted.id}


def test_schedule_metadata_is_stored_listed_and_filtered(store: Store) -> None:
    rule = CronRule(expression="0 9 * * *", timezone="UTC")
    a = store.insert_schedule(
        NewSchedule(name="a", rule=rule, target=TARGET, metadata={"team": "billing"}),
        next_fire_at=T0,
        now=T0,
    )
    store.insert_schedule(NewSchedule(name="b", rule=rule, target=TARGET), next_fire_at=T0, now=T0)
    assert a.metadata == {"team": "billing"}
    page = store.list_schedules(ScheduleFilter(tenant="default", metadata={"team": "billing"}))
    assert [s.name for s in page.schedules] == ["a"]
    # A schedule's occurrence carries its metadata.
    advanced = store.advance_schedule(
        a.id,
        expected_next=T0,
        new_next=T0 + timedelta(days=1),
        jobs=[occurrence_job(a, T0)],
        now=T0,
    )
    assert advanced
    assert listed(store, metadata={"team": "billing"}, schedule_id=a.id) != set()


# -- PATCH of a job ----------------------------------------------------------------------------


def test_a_scheduled_job_changes_and_a_claim_then_runs_the_changed_job(store: Store) -> None:
    stored = store.insert(
        job(run_at=T0 + timedelta(hours=1), metadata={"a": "1", "b": "2"}), now=T0
    )
    change = JobChange(
        run_at=T0,
        target=PythonTarget(handler="other"),
        retry=BackoffPolicy(max_attempts=2),
        timeout=timedelta(seconds=5),
        name="renamed",
        metadata={"a": None, "c": "3"},
    )
    found = store.update_scheduled_job("default", stored.id, change, now=T0)
    assert found.changed and found.job is not None
    assert found.job.metadata == {"b": "2", "c": "3"}  # merged: a removed, c added, b kept
    (claimed,) = claim(store)  # due now: the new run_at
    assert claimed.id == stored.id
    assert claimed.target == PythonTarget(handler="other")
    assert claimed.retry.max_attempts == 2
    assert claimed.timeout == timedelta(seconds=5)
    assert claimed.name == "renamed"


def test_a_claimed_job_cannot_change(store: Store) -> None:
    stored = store.insert(job(), now=T0)
    claim(store)
    found = store.update_scheduled_job("default", stored.id, JobChange(name="late"), now=T0)
    assert not found.changed
    assert found.job is not None and found.job.state is JobState.RUNNING
    assert store.get("default", stored.id).name is None  # type: ignore[union-attr]


def test_an_ended_or_retrying_job_cannot_change_and_an_absent_one_is_none(store: Store) -> None:
    cancelled = store.insert(job(), now=T0)
    store.cancel("default", cancelled.id, now=T0)
    found = store.update_scheduled_job("default", cancelled.id, JobChange(name="x"), now=T0)
    assert not found.changed and found.job is not None
    assert found.job.state is JobState.CANCELLED
    # Scheduled again after a lost attempt: it has started, and stays as it is.
    lost = store.insert(job(), now=T0)
    claim(store)
    store.rescue_expired(now=T0 + timedelta(minutes=5))
    again = store.get("default", lost.id)
    assert again is not None and again.state is JobState.SCHEDULED and again.attempts == 1
    assert not store.update_scheduled_job("default", lost.id, JobChange(name="y"), now=T0).changed
    assert store.update_scheduled_job("default", "nope", JobChange(), now=T0).job is None
    assert store.update_scheduled_job("other", again.id, JobChange(), now=T0).job is None


def test_a_change_over_the_metadata_limit_or_onto_a_live_name_changes_nothing(
    store: Store,
) -> None:
    full = store.insert(job(metadata={f"k{i}": "v" for i in range(50)}), now=T0)
    with pytest.raises(InvalidInput) as refused:
        store.update_scheduled_job("default", full.id, JobChange(metadata={"one": "more"}), now=T0)
    assert refused.value.field == "metadata"
    store.insert(job(name="taken"), now=T0)
    with pytest.raises(Conflict):
        store.update_scheduled_job("default", full.id, JobChange(name="taken"), now=T0)
    assert store.get("default", full.id) == full


def test_an_http_target_and_a_removed_name_are_stored(store: Store) -> None:
    stored = store.insert(job(name="n"), now=T0)
    target = HttpTarget(url="https://example.com/hook", headers={"X-A": "1"}, body={"x": 1})
    change = JobChange(target=target, name=None)
    found = store.update_scheduled_job("default", stored.id, change, now=T0)
    assert found.job is not None
    assert found.job.target == target and found.job.name is None


# -- a schedule's replacement ------------------------------------------------------------------


def test_replacing_a_schedule_is_a_compare_and_set_on_its_revision(store: Store) -> None:
    rule = CronRule(expression="*/5 * * * *", timezone="UTC")
    s = store.insert_schedule(
        NewSchedule(name="s", rule=rule, target=TARGET), next_fire_at=T0, now=T0
    )
    assert s.revision == 0
    # Materialised ahead: two occurrences, one in the past (kept) and one after now (replaced).
    past, ahead = T0 - timedelta(minutes=5), T0 + timedelta(minutes=5)
    store.advance_schedule(
        s.id,
        expected_next=T0,
        new_next=ahead + timedelta(minutes=5),
        jobs=[occurrence_job(s, past), occurrence_job(s, ahead)],
        now=T0,
        revision=0,
    )
    s = store.get_schedule("default", s.id)  # type: ignore[assignment]
    new = dataclasses.replace(
        s, metadata={"v": "2"}, next_fire_at=ahead, end_at=T0 + timedelta(days=1)
    )
    replaced = store.replace_schedule(new, expected_revision=s.revision, now=T0)
    assert replaced is not None
    assert replaced.revision == s.revision + 1
    assert replaced.metadata == {"v": "2"} and replaced.end_at == T0 + timedelta(days=1)
    assert replaced.next_fire_at == ahead
    runs_at = {j.run_at for j in store.list_jobs(JobFilter(tenant="default")).jobs}
    assert runs_at == {past}  # the job ahead went; the past one stays
    # A stale revision changes nothing, and an advance planned from it is refused.
    assert store.replace_schedule(new, expected_revision=s.revision, now=T0) is None
    assert not store.advance_schedule(
        s.id, expected_next=ahead, new_next=None, jobs=[], now=T0, revision=s.revision
    )
    assert store.advance_schedule(
        s.id, expected_next=ahead, new_next=None, jobs=[], now=T0, revision=replaced.revision
    )
    ended = store.list_schedules(ScheduleFilter(tenant="default", ended=True))
    assert [x.id for x in ended.schedules] == [s.id]
    assert store.list_schedules(ScheduleFilter(tenant="default", ended=False)).schedules == []


def test_replacing_onto_another_schedules_name_is_a_conflict(store: Store) -> None:
    rule = CronRule(expression="0 9 * * *", timezone="UTC")
    a = store.insert_schedule(
        NewSchedule(name="a", rule=rule, target=TARGET), next_fire_at=T0, now=T0
    )
    store.insert_schedule(NewSchedule(name="b", rule=rule, target=TARGET), next_fire_at=T0, now=T0)
    with pytest.raises(Conflict):
        store.replace_schedule(dataclasses.replace(a, name="b"), expected_revision=0, now=T0)
    kept = store.replace_schedule(dataclasses.replace(a, name="a"), expected_revision=0, now=T0)
    assert kept is not None and kept.name == "a"


def test_a_window_is_stored_and_a_reversed_one_refused(store: Store) -> None:
    rule = CronRule(expression="0 9 * * *", timezone="UTC")
    start, end = T0, T0 + timedelta(days=3)
    s = store.insert_schedule(
        NewSchedule(name="w", rule=rule, target=TARGET, start_at=start, end_at=end),
        next_fire_at=T0,
        now=T0,
    )
    assert (s.start_at, s.end_at) == (start, end)
    with pytest.raises(InvalidInput) as refused:
        NewSchedule(name="w", rule=rule, target=TARGET, start_at=end, end_at=start)
    assert refused.value.field == "end_at"
