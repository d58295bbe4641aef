"""`UNSET` is the one "not given" marker of a change: a change of nothing changes nothing,
None removes only where a field may be removed, and the PATCH bodies map null to it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.jobs.changes import UNSET, JobChange, ScheduleChange, changed_schedule
from recoup.jobs.model import BackoffPolicy, Job, JobState, PythonTarget
from recoup.jobs.schedules.model import CronRule, MissedPolicy, Schedule
from recoup.wire.schemas.jobs import JobPatchIn
from recoup.wire.schemas.schedules import SchedulePatchIn

START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

JOB = Job(
    id="job_1",
    tenant="default",
    name="nightly",
    run_at=START,
    target=PythonTarget(handler="h"),
    payload=None,
    idempotency_key=None,
    retry=BackoffPolicy(),
    timeout=timedelta(seconds=30),
    keep_for=None,
    schedule_id=None,
    state=JobState.SCHEDULED,
    attempts=0,
    lease_expires_at=None,
    leased_by=None,
    last_error=None,
    created_at=START,
    updated_at=START,
    finished_at=None,
    metadata={"team": "billing"},
)
SCHEDULE = Schedule(
    id="s",
    tenant="default",
    name="s",
    rule=CronRule(expression="0 9 * * *", timezone="UTC"),
    target=PythonTarget(handler="tick"),
    payload=None,
    retry=BackoffPolicy(),
    timeout=timedelta(seconds=30),
    missed=MissedPolicy.RUN_ALL,
    paused=False,
    next_fire_at=None,
    created_at=START,
    updated_at=START,
    metadata={"team": "billing"},
    start_at=START,
    end_at=START + timedelta(days=30),
)


def test_a_change_of_nothing_leaves_a_job_and_a_schedule_as_they_are() -> None:
    assert JobChange().applied_to(JOB) == JOB
    assert changed_schedule(SCHEDULE, ScheduleChange()) == SCHEDULE
    assert not ScheduleChange(metadata={"team": None}).moves_occurrences


def test_none_removes_what_may_be_removed_and_only_that() -> None:
    assert JobChange(name=None).applied_to(JOB).name is None
    unbounded = changed_schedule(SCHEDULE, ScheduleChange(start_at=None, end_at=None))
    assert (unbounded.start_at, unbounded.end_at) == (None, None)
    assert JobChange(metadata={"team": None}).applied_to(JOB).metadata == {}


LATER = START + timedelta(days=1)
METADATA = {"team": None, "tier": "gold"}  # merged: "team" removed, "tier" added
EVERY_JOB_FIELD = JobChange(
    run_at=LATER,
    target=PythonTarget(handler="other"),
    retry=BackoffPolicy(max_attempts=2),
    timeout=timedelta(seconds=5),
    name="renamed",
    metadata=METADATA,
)
EVERY_SCHEDULE_FIELD = ScheduleChange(
    name="renamed",
    rule=CronRule(expression="0 10 * * *", timezone="UTC"),
    target=PythonTarget(handler="other"),
    retry=BackoffPolicy(max_attempts=2),
    timeout=timedelta(seconds=5),
    missed=MissedPolicy.SKIP,
    paused=True,
    metadata=METADATA,
    start_at=LATER,
    end_at=LATER + timedelta(days=1),
)


@pytest.mark.parametrize(
    ("change", "record", "apply"),
    [
        (EVERY_JOB_FIELD, JOB, JobChange.applied_to),
        (EVERY_SCHEDULE_FIELD, SCHEDULE, lambda change, s: changed_schedule(s, change)),
    ],
)
def test_a_change_of_every_field_gives_each_and_touches_nothing_else(
    change: JobChange | ScheduleChange, record: Job | Schedule, apply: Any
) -> None:
    changed = apply(change, record)
    names = {field.name for field in dataclasses.fields(change)}
    for name in names:
        expected = {"tier": "gold"} if name == "metadata" else getattr(change, name)
        assert getattr(changed, name) == expected, name
        assert getattr(record, name) != expected, name  # so the change shows
    kept = [f.name for f in dataclasses.fields(record) if f.name not in names]
    assert [getattr(changed, n) for n in kept] == [getattr(record, n) for n in kept]


@pytest.mark.parametrize(
    "change",
    [
        ScheduleChange(rule=CronRule(expression="0 10 * * *", timezone="UTC")),
        ScheduleChange(paused=False),  # given, even though equal to the stored value
        ScheduleChange(start_at=None),
        ScheduleChange(end_at=START),
    ],
)
def test_a_given_rule_window_or_pausing_moves_the_occurrences(change: ScheduleChange) -> None:
    assert change.moves_occurrences


def test_a_job_patch_maps_null_to_unset_except_for_the_name() -> None:
    body = {"run_at": None, "target": None, "retry": None, "timeout_seconds": None}
    change = JobPatchIn.model_validate({**body, "metadata": None, "name": None}).change(START)
    assert change == JobChange(name=None)
    assert JobPatchIn.model_validate({}).change(START) == JobChange()
    delayed = JobPatchIn.model_validate({"delay_seconds": 60}).change(START)
    assert delayed == JobChange(run_at=START + timedelta(seconds=60))


def test_a_schedule_patch_maps_null_to_unset_except_for_the_window() -> None:
    nulls = {"name": None, "paused": None, "missed": None, "metadata": None, "end_at": None}
    change = SchedulePatchIn.model_validate(nulls).change(SCHEDULE)
    assert change == ScheduleChange(end_at=None)
    assert change.start_at is UNSET
    kept = changed_schedule(SCHEDULE, change)
    assert kept == dataclasses.replace(SCHEDULE, end_at=None)
