"""Recurring schedules: materialised occurrences, DST, missed-occurrence policies, pause."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from recoup.errors import Conflict, InvalidInput
from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import BackoffPolicy, JobState, PythonTarget
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.schedules.model import AnchorRule, CronRule, MissedPolicy, NewSchedule, Schedule
from recoup.jobs.schedules.occurrences import occurrence_name, plan_advance
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.time_travel import TestClock
from recoup.jobs.worker import Worker
from recoup.timekeeping.clock import VirtualClock

NEW_YORK = ZoneInfo("America/New_York")
TARGET = PythonTarget(handler="tick")


def harness(
    store: Any, start: datetime, *, schedule_horizon: timedelta = timedelta(hours=1)
) -> tuple[Scheduler, Worker, VirtualClock, list[datetime]]:
    clock = VirtualClock(start)
    registry = HandlerRegistry()
    fired: list[datetime] = []

    @registry.register("tick", inline=True)
    def tick(ctx: HandlerContext) -> None:
        fired.append(ctx.run_at)

    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard())
    worker = scheduler.worker(
        handlers=registry, schedule_horizon=schedule_horizon, rng=random.Random(0)
    )
    return scheduler, worker, clock, fired


def run_for(worker: Worker, clock: VirtualClock, until: datetime) -> None:
    """Run every job and schedule occurrence due up to `until`, in due order: the clock steps
    straight from one due instant to the next, in one worker session."""
    TestClock(clock, worker, worker.store, schedules=worker.store).advance_to(until)


def local_dates(instants: list[datetime]) -> Counter[date]:
    return Counter(at.astimezone(NEW_YORK).date() for at in instants)


def test_a_0230_cron_fires_once_on_the_spring_forward_day(jobstore: Any) -> None:
    # DST begins in New York on 2026-03-08: 02:00 EST becomes 03:00 EDT, so 02:30 never
    # happens that day. Debian cron runs the job once, right after the gap (03:00 EDT).
    start = datetime(2026, 3, 6, 17, 0, tzinfo=UTC)
    scheduler, worker, clock, fired = harness(jobstore, start)
    scheduler.create_schedule(
        NewSchedule(
            name="nightly",
            rule=CronRule(expression="30 2 * * *", timezone="America/New_York"),
            target=TARGET,
        )
    )
    run_for(worker, clock, datetime(2026, 3, 10, 12, 0, tzinfo=UTC))
    assert local_dates(fired) == {
        date(2026, 3, 7): 1,
        date(2026, 3, 8): 1,
        date(2026, 3, 9): 1,
        date(2026, 3, 10): 1,
    }
    assert datetime(2026, 3, 8, 7, 0, tzinfo=UTC) in fired  # 03:00 EDT, just after the gap
    assert scheduler.get_by_name("nightly@2026-03-08T07:00:00Z").state is JobState.SUCCEEDED


def test_a_0130_cron_fires_once_on_the_fall_back_day(jobstore: Any) -> None:
    # DST ends in New York on 2026-11-01: 01:00–02:00 happens twice (EDT, then EST). Debian
    # cron runs a fixed-time job once, at the first 01:30.
    start = datetime(2026, 10, 30, 17, 0, tzinfo=UTC)
    scheduler, worker, clock, fired = harness(jobstore, start)
    scheduler.create_schedule(
        NewSchedule(
            name="nightly",
            rule=CronRule(expression="30 1 * * *", timezone="America/New_York"),
            target=TARGET,
        )
    )
    run_for(worker, clock, datetime(2026, 11, 3, 12, 0, tzinfo=UTC))
    assert local_dates(fired) == {
        date(2026, 10, 31): 1,
        date(2026, 11, 1): 1,
        date(2026, 11, 2): 1,
        date(2026, 11, 3): 1,
    }
    assert datetime(2026, 11, 1, 5, 30, tzinfo=UTC) in fired  # 01:30 EDT, the first one
    assert datetime(2026, 11, 1, 6, 30, tzinfo=UTC) not in fired  # not 01:30 EST again


def test_each_occurrence_is_a_job_named_after_the_schedule_and_instant(jobstore: Any) -> None:
    start = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
    scheduler, worker, clock, fired = harness(jobstore, start)
    schedule = scheduler.create_schedule(
        NewSchedule(
            name="hourly", rule=CronRule(expression="0 * * * *", timezone="UTC"), target=TARGET
        )
    )
    run_for(worker, clock, datetime(2026, 6, 1, 15, 0, tzinfo=UTC))
    page = scheduler.list_jobs(schedule_id=schedule.id)
    names = sorted(job.name or "" for job in page.jobs)
    assert names[:3] == [
        "hourly@2026-06-01T13:00:00Z",
        "hourly@2026-06-01T14:00:00Z",
        "hourly@2026-06-01T15:00:00Z",
    ]
    assert fired == [datetime(2026, 6, 1, h, tzinfo=UTC) for h in (13, 14, 15)]


def test_two_materialisers_never_create_an_occurrence_twice(jobstore: Any) -> None:
    start = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    scheduler, _, clock, _ = harness(jobstore, start)
    scheduler.create_schedule(
        NewSchedule(
            name="m", rule=CronRule(expression="*/5 * * * *", timezone="UTC"), target=TARGET
        )
    )
    clock.advance(timedelta(minutes=30))
    other = Scheduler(jobstore, clock=clock)
    scheduler.materialise(horizon=timedelta(minutes=10))
    other.materialise(horizon=timedelta(minutes=10))
    scheduler.materialise(horizon=timedelta(minutes=10))
    names = [job.name for job in scheduler.list_jobs(name_prefix="m@", limit=1000).jobs]
    assert len(names) == len(set(names))


def downtime(store: Any, missed: MissedPolicy) -> tuple[Scheduler, list[datetime], Schedule]:
    # An hourly schedule, then five hours with no worker, then one worker pass at 17:00:30.
    start = datetime(2026, 6, 1, 11, 30, tzinfo=UTC)
    scheduler, worker, clock, fired = harness(store, start, schedule_horizon=timedelta(minutes=1))
    schedule = scheduler.create_schedule(
        NewSchedule(
            name="hourly",
            rule=CronRule(expression="0 * * * *", timezone="UTC"),
            target=TARGET,
            missed=missed,
        )
    )
    # Created at 11:30: the first occurrence (12:00) is not materialised yet.
    clock.set(datetime(2026, 6, 1, 17, 0, 30, tzinfo=UTC))
    worker.drain()
    return scheduler, fired, schedule


def test_skip_drops_missed_occurrences(jobstore: Any) -> None:
    _, fired, _ = downtime(jobstore, MissedPolicy.SKIP)
    # 12:00–16:00 are skipped; 17:00 is only 30 s late (within the grace), so it runs.
    assert [at.hour for at in fired] == [17]


def test_run_once_runs_only_the_latest_missed_occurrence(jobstore: Any) -> None:
    _, fired, _ = downtime(jobstore, MissedPolicy.RUN_ONCE)
    assert sorted(at.hour for at in fired) == [16, 17]


def test_run_all_runs_every_missed_occurrence(jobstore: Any) -> None:
    _, fired, _ = downtime(jobstore, MissedPolicy.RUN_ALL)
    assert sorted(at.hour for at in fired) == [12, 13, 14, 15, 16, 17]


def test_pause_stops_occurrences_and_resume_starts_from_the_next_one(jobstore: Any) -> None:
    start = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
    scheduler, worker, clock, fired = harness(
        jobstore, start, schedule_horizon=timedelta(minutes=1)
    )
    schedule = scheduler.create_schedule(
        NewSchedule(
            name="q",
            rule=CronRule(expression="*/15 * * * *", timezone="UTC"),
            target=TARGET,
            missed=MissedPolicy.RUN_ALL,
        )
    )
    paused = scheduler.pause(schedule.id)
    assert paused.paused
    run_for(worker, clock, datetime(2026, 6, 1, 13, 0, tzinfo=UTC))
    assert fired == []
    resumed = scheduler.resume(schedule.id)
    assert not resumed.paused
    assert resumed.next_fire_at == datetime(2026, 6, 1, 13, 15, tzinfo=UTC)
    run_for(worker, clock, datetime(2026, 6, 1, 13, 31, tzinfo=UTC))
    assert fired == [
        datetime(2026, 6, 1, 13, 15, tzinfo=UTC),
        datetime(2026, 6, 1, 13, 30, tzinfo=UTC),
    ]


def test_deleting_a_schedule_cancels_its_pending_jobs(jobstore: Any) -> None:
    start = datetime(2026, 6, 1, 12, 9, 30, tzinfo=UTC)
    scheduler, _, _, _ = harness(jobstore, start)
    schedule = scheduler.create_schedule(
        NewSchedule(
            name="d", rule=CronRule(expression="*/10 * * * *", timezone="UTC"), target=TARGET
        )
    )
    assert scheduler.list_jobs(schedule_id=schedule.id).jobs  # materialised within the minute
    scheduler.delete_schedule(schedule.id)
    states = {job.state for job in scheduler.list_jobs(schedule_id=schedule.id).jobs}
    assert states == {JobState.CANCELLED}


def test_upcoming_lists_future_occurrences_of_an_anchor(jobstore: Any) -> None:
    start = datetime(2026, 1, 15, tzinfo=UTC)
    scheduler, _, _, _ = harness(jobstore, start)
    schedule = scheduler.create_schedule(
        NewSchedule(
            name="renewal",
            rule=AnchorRule(local=datetime(2026, 1, 31, 9, 0), timezone="America/New_York"),
            target=TARGET,
        )
    )
    assert [at.astimezone(NEW_YORK).date() for at in scheduler.upcoming(schedule, 3)] == [
        date(2026, 1, 31),
        date(2026, 2, 28),  # clamped
        date(2026, 3, 31),  # back to the 31st: derived from the anchor, not from February
    ]
    assert scheduler.upcoming(schedule.id, 1)[0].astimezone(NEW_YORK).hour == 9


def test_schedule_names_are_unique_per_tenant(jobstore: Any) -> None:
    scheduler, _, _, _ = harness(jobstore, datetime(2026, 6, 1, tzinfo=UTC))
    rule = CronRule(expression="0 9 * * *", timezone="Europe/Paris")
    scheduler.create_schedule(NewSchedule(name="daily", rule=rule, target=TARGET))
    with pytest.raises(Conflict):
        scheduler.create_schedule(NewSchedule(name="daily", rule=rule, target=TARGET))


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        (
            NewSchedule(
                name="x", rule=CronRule(expression="61 * * * *", timezone="UTC"), target=TARGET
            ),
            "rule.expression",
        ),
        (
            NewSchedule(
                name="x",
                rule=CronRule(expression="0 9 * * *", timezone="Mars/Olympus"),
                target=TARGET,
            ),
            "rule.timezone",
        ),
        (
            NewSchedule(
                name="a@b", rule=CronRule(expression="0 9 * * *", timezone="UTC"), target=TARGET
            ),
            "name",
        ),
        (
            NewSchedule(
                name="x",
                rule=AnchorRule(local=datetime(2026, 1, 1), timezone="UTC", every="fortnight"),
                target=TARGET,
            ),
            "rule.every",
        ),
    ],
)
def test_invalid_schedules_are_refused_naming_the_field(
    jobstore: Any, schedule: NewSchedule, field: str
) -> None:
    scheduler, _, _, _ = harness(jobstore, datetime(2026, 6, 1, tzinfo=UTC))
    with pytest.raises(InvalidInput) as caught:
        scheduler.create_schedule(schedule)
    assert caught.value.field == field


# -- the pure planner ------------------------------------------------------------------------


def schedule_at(
    next_fire_at: datetime, missed: MissedPolicy, expression: str = "0 * * * *"
) -> Schedule:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return Schedule(
        id="s1",
        tenant="default",
        name="h",
        rule=CronRule(expression=expression, timezone="UTC"),
        target=TARGET,
        payload=None,
        retry=BackoffPolicy(),
        timeout=timedelta(seconds=30),
        missed=missed,
        paused=False,
        next_fire_at=next_fire_at,
        created_at=at,
        updated_at=at,
    )


def test_the_planner_chunks_a_long_run_all_backlog() -> None:
    now = datetime(2026, 6, 2, 0, 0, tzinfo=UTC)
    first = datetime(2026, 6, 1, 0, 0, tzinfo=UTC)
    plan = plan_advance(schedule_at(first, MissedPolicy.RUN_ALL, "* * * * *"), now=now, limit=100)
    assert plan is not None and len(plan.jobs) == 100
    assert plan.new_next == first + timedelta(minutes=100)


def test_the_planner_skips_a_long_backlog_without_walking_it() -> None:
    now = datetime(2026, 6, 2, 0, 0, 30, tzinfo=UTC)
    plan = plan_advance(
        schedule_at(datetime(2020, 1, 1, tzinfo=UTC), MissedPolicy.SKIP, "* * * * *"), now=now
    )
    assert plan is not None
    # Six years of minutes are dropped at once: the first job is the first occurrence at or
    # after now − grace (23:59:30), and the rest run up to now + horizon.
    assert [job.run_at for job in plan.jobs] == [
        datetime(2026, 6, 2, 0, 0, tzinfo=UTC),
        datetime(2026, 6, 2, 0, 1, tzinfo=UTC),
    ]
    assert plan.new_next == datetime(2026, 6, 2, 0, 2, tzinfo=UTC)


def test_occurrence_names_use_the_utc_instant() -> None:
    at = datetime(2026, 3, 8, 3, 0, tzinfo=NEW_YORK)
    assert occurrence_name("nightly", at) == "nightly@2026-03-08T07:00:00Z"
