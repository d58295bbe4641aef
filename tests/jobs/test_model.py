import uuid
from datetime import UTC, datetime, timedelta

import pytest

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
