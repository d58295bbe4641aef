"""A schedule's window (start_at, end_at), as properties over cron expressions in zones with
DST: exactly the rule's occurrences inside the window fire, none outside, and the schedule
ends once none is left. Pure: `plan_advance` walked by hand, no store."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.jobs.model import BackoffPolicy, PythonTarget
from recoup.jobs.schedules.model import CronRule, MissedPolicy, Schedule, ScheduleState
from recoup.jobs.schedules.occurrences import iter_after, next_in_window, plan_advance, upcoming

# Around New York's spring-forward (2026-03-08) and London's (2026-03-29) transitions, and
# the fall-back ones (2026-11-01, 2026-10-25): a fortnight either side of each.
BASES = [
    datetime(2026, 3, 1, tzinfo=UTC),
    datetime(2026, 3, 22, tzinfo=UTC),
    datetime(2026, 10, 18, tzinfo=UTC),
    datetime(2026, 10, 25, tzinfo=UTC),
]
ZONES = ["America/New_York", "Europe/London", "Australia/Lord_Howe", "UTC"]
EXPRESSIONS = [
    "30 2 * * *",  # inside the spring-forward gap in New York and London
    "30 1 * * *",  # inside the fall-back fold
    "*/30 1-3 * * *",  # a wildcard-ish step through both
    "0 */6 * * *",
    "15 9 * * 1-5",
]
SPAN = timedelta(days=14)


def schedule(rule: CronRule, start_at: datetime | None, end_at: datetime | None) -> Schedule:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return Schedule(
        id="s",
        tenant="default",
        name="s",
        rule=rule,
        target=PythonTarget(handler="tick"),
        payload=None,
        retry=BackoffPolicy(),
        timeout=timedelta(seconds=30),
        missed=MissedPolicy.RUN_ALL,
        paused=False,
        next_fire_at=None,
        created_at=at,
        updated_at=at,
        start_at=start_at,
        end_at=end_at,
    )


windows = st.tuples(
    st.sampled_from(BASES),
    st.sampled_from(ZONES),
    st.sampled_from(EXPRESSIONS),
    st.one_of(st.none(), st.integers(min_value=-600, max_value=SPAN // timedelta(minutes=1))),
    st.one_of(st.none(), st.integers(min_value=0, max_value=SPAN // timedelta(minutes=1))),
)


def in_window(at: datetime, start: datetime | None, end: datetime | None) -> bool:
    return (start is None or at >= start) and (end is None or at <= end)


@settings(max_examples=150, deadline=None)
@given(windows)
def test_exactly_the_occurrences_inside_the_window_fire(case: tuple) -> None:  # type: ignore[type-arg]
    base, zone, expression, start_minutes, length_minutes = case
    rule = CronRule(expression=expression, timezone=zone)
    start = None if start_minutes is None else base + timedelta(minutes=start_minutes)
    end = None if length_minutes is None else (start or base) + timedelta(minutes=length_minutes)
    until = base + SPAN
    # What the rule gives, filtered independently of the code under test.
    expected = []
    for at in iter_after(rule, base):
        if at > until:
            break
        if in_window(at, start, end):
            expected.append(at)
    # The materialiser as a worker runs it: at each next occurrence.
    current = dataclasses.replace(
        schedule(rule, start, end), next_fire_at=next_in_window(rule, base, start, end)
    )
    fired: list[datetime] = []
    while current.next_fire_at is not None and current.next_fire_at <= until:
        plan = plan_advance(current, now=current.next_fire_at)
        assert plan is not None
        fired += [job.run_at for job in plan.jobs]
        current = dataclasses.replace(current, next_fire_at=plan.new_next)
    assert [at for at in fired if at <= until] == expected
    assert all(in_window(at, start, end) for at in fired)
    if end is not None and end <= until:
        assert current.next_fire_at is None
        assert current.state is ScheduleState.ENDED
    # `upcoming` tells the same story.
    assert (
        upcoming(rule, base, len(expected) + 1, start_at=start, end_at=end)[: len(expected)]
        == expected
    )


@settings(max_examples=150, deadline=None)
@given(
    windows,
    st.sampled_from(list(MissedPolicy)),
    st.lists(st.integers(min_value=1, max_value=36 * 60), min_size=1, max_size=20),
)
def test_no_policy_and_no_gap_between_passes_fires_outside_the_window(
    case: tuple,  # type: ignore[type-arg]
    missed: MissedPolicy,
    steps: list[int],
) -> None:
    base, zone, expression, start_minutes, length_minutes = case
    rule = CronRule(expression=expression, timezone=zone)
    start = None if start_minutes is None else base + timedelta(minutes=start_minutes)
    end = None if length_minutes is None else (start or base) + timedelta(minutes=length_minutes)
    current = dataclasses.replace(
        schedule(rule, start, end),
        missed=missed,
        next_fire_at=next_in_window(rule, base, start, end),
    )
    now = base
    fired: list[datetime] = []
    for minutes in steps:  # passes at irregular moments: downtime makes occurrences missed
        now += timedelta(minutes=minutes)
        plan = plan_advance(current, now=now)
        if plan is None:
            continue
        fired += [job.run_at for job in plan.jobs]
        current = dataclasses.replace(current, next_fire_at=plan.new_next)
    assert all(in_window(at, start, end) for at in fired)
    assert fired == sorted(set(fired))  # each occurrence once, in order


def test_an_occurrence_on_either_bound_fires() -> None:
    rule = CronRule(expression="0 9 * * *", timezone="UTC")
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    end = datetime(2026, 3, 4, 9, 0, tzinfo=UTC)
    base = datetime(2026, 3, 1, tzinfo=UTC)
    assert upcoming(rule, base, 10, start_at=start, end_at=end) == [
        start,
        datetime(2026, 3, 3, 9, 0, tzinfo=UTC),
        end,
    ]
    assert next_in_window(rule, end, start, end) is None


def test_a_schedule_whose_next_occurrence_is_past_a_moved_end_ends_at_its_next_pass() -> None:
    rule = CronRule(expression="0 9 * * *", timezone="UTC")
    at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    current = dataclasses.replace(schedule(rule, None, at - timedelta(hours=1)), next_fire_at=at)
    plan = plan_advance(current, now=at)
    assert plan is not None and plan.jobs == [] and plan.new_next is None
