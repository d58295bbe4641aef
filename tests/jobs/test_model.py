import itertools
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import InvalidInput
from recoup.jobs.model import BackoffPolicy, NewJob, PythonTarget, new_id
from recoup.jobs.schedules.model import CronRule, NewSchedule


def test_job_ids_are_uuid7_in_canonical_text_and_ordered_by_creation() -> None:
    ids = [new_id() for _ in range(2_000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 7
        assert parsed.variant == uuid.RFC_4122
    # The first 48 bits are milliseconds: ids made later never sort earlier.
    stamps = [uuid.UUID(text).int >> 80 for text in ids]
    assert stamps == sorted(stamps)


def test_a_job_refuses_a_naive_run_at() -> None:
    with pytest.raises(InvalidInput, match="run_at"):
        NewJob(run_at=datetime(2026, 1, 1, 9, 0), target=PythonTarget(handler="noop"))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_attempts": 0}, "retry.max_attempts"),
        ({"min_backoff": timedelta(seconds=-1)}, "retry.min_backoff_seconds"),
        (
            {"min_backoff": timedelta(seconds=10), "max_backoff": timedelta(seconds=5)},
            "retry.max_backoff_seconds",
        ),
    ],
)
def test_a_retry_policy_names_the_field_it_refuses(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        BackoffPolicy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


@pytest.mark.parametrize("seconds", [0, -1, 3600.5])
def test_a_schedule_refuses_the_timeouts_a_job_refuses(seconds: float) -> None:
    # Found by fuzzing: a schedule took a zero timeout and failed in the store.
    with pytest.raises(InvalidInput, match="timeout_seconds") as refused:
        NewSchedule(
            name="nightly",
            rule=CronRule(expression="0 3 * * *", timezone="UTC"),
            target=PythonTarget(handler="noop"),
            timeout=timedelta(seconds=seconds),
        )
    assert refused.value.allowed == "expected more than 0 and at most 3600"
    with pytest.raises(InvalidInput, match="timeout_seconds"):
        NewJob(
            run_at=datetime(2026, 1, 1, tzinfo=UTC),
            target=PythonTarget(handler="noop"),
            timeout=timedelta(seconds=seconds),
        )


# Flow control (`recoup.jobs.flow`): the limits a job may carry, and the slots a claim reserves.


def test_flow_limits_need_a_key_and_a_key_needs_a_limit() -> None:
    target = PythonTarget(handler="h")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for fields, name in (
        ({"flow_key": "k"}, "flow_key"),
        ({"flow_rate": 3}, "flow_rate"),
        ({"flow_key": "k", "flow_rate": 0}, "flow_rate"),
        ({"flow_key": "k", "flow_parallelism": 0}, "flow_parallelism"),
        ({"flow_key": "k", "flow_rate": 1, "flow_period": timedelta(0)}, "flow_period"),
        ({"flow_key": "", "flow_rate": 1}, "flow_key"),
    ):
        with pytest.raises(InvalidInput) as caught:
            NewJob(run_at=at, target=target, **fields)
        assert caught.value.field == name


@given(
    rate=st.integers(1, 50),
    period_ms=st.integers(1, 5000),
    offsets=st.lists(st.integers(0, 10_000), min_size=1, max_size=60),
    claims=st.integers(1, 6),
    free_ms=st.one_of(st.none(), st.integers(0, 5000)),
)
def test_reserved_slots_are_spaced_in_due_order_never_early_and_never_past_the_horizon(
    rate: int, period_ms: int, offsets: list[int], claims: int, free_ms: int | None
) -> None:
    from recoup.jobs.flow import START_TOLERANCE, reserve, spacing

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    period = timedelta(milliseconds=period_ms)
    due = sorted(t0 + timedelta(milliseconds=o) for o in offsets)
    free = None if free_ms is None else t0 + timedelta(milliseconds=free_ms)
    starts: list[datetime] = []
    now = t0
    for _ in range(claims):  # successive claims, each for the jobs not taken yet
        until = now + timedelta(seconds=2)
        slots = reserve(
            due[len(starts) :],
            now=now,
            until=until,
            next_start_at=free,
            rate=rate,
            period=period,
            room=10,
        )
        assert len(slots.starts) <= 10 and all(s <= until for s in slots.starts)
        starts += slots.starts
        free = slots.next_start_at
        now += timedelta(seconds=1)
    assert all(s >= d for s, d in zip(starts, due, strict=False))  # never before its instant
    step = spacing(rate, period)
    assert all(b - a >= step for a, b in itertools.pairwise(starts))
    # Each start may come up to the tolerance late; still at most `rate` in any period.
    for i in range(len(starts) - rate):
        assert starts[i + rate] - (starts[i] + START_TOLERANCE) >= period


@given(
    rate=st.integers(1, 500),
    period_ms=st.integers(1, 5000),
    offsets=st.lists(st.integers(0, 3000), min_size=1, max_size=80),
    horizon_ms=st.integers(0, 2000),
    free_ms=st.one_of(st.none(), st.integers(-1000, 3000)),
)
def test_a_claim_reading_only_most_starts_jobs_of_a_line_reserves_the_same_slots(
    rate: int, period_ms: int, offsets: list[int], horizon_ms: int, free_ms: int | None
) -> None:
    # The claim reads a key's line up to `most_starts` (its throttled backlog left unread):
    # that must never cut a slot that reading the whole line would have given.
    from recoup.jobs.flow import most_starts, reserve

    now = datetime(2026, 1, 1, tzinfo=UTC)
    period = timedelta(milliseconds=period_ms)
    until = now + timedelta(milliseconds=horizon_ms)
    due = sorted(now + timedelta(milliseconds=o) for o in offsets)
    free = None if free_ms is None else now + timedelta(milliseconds=free_ms)
    limits = {"now": now, "until": until, "next_start_at": free, "rate": rate, "period": period}
    bound = most_starts(**limits)
    assert bound is not None
    whole = reserve(due, room=len(due), **limits)
    read = reserve(due[:bound], room=len(due), **limits)
    assert read == whole
    # And the bound is the horizon's slots, not the backlog: at most horizon / spacing + 1.
    assert bound <= horizon_ms * rate // period_ms + 1


def test_without_a_rate_most_starts_sets_no_bound() -> None:
    from recoup.jobs.flow import most_starts

    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert (
        most_starts(now=now, until=now, next_start_at=None, rate=None, period=timedelta(1)) is None
    )
