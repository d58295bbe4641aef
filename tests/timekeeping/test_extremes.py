"""The ends of time: renewals past year 9999 and instants outside the accepted years are
refused with an error naming the field, never an OverflowError or a bare ValueError."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recoup.cli import main
from recoup.errors import InvalidInput
from recoup.jobs.schedules.model import AnchorRule
from recoup.jobs.schedules.occurrences import next_after, upcoming
from recoup.timekeeping.instants import MAX_YEAR, MIN_YEAR, parse_instant, to_utc
from recoup.timekeeping.recurrence import (
    Anchor,
    OutOfRange,
    SeriesEnded,
    first_after,
    iter_occurrences,
    occurrence,
    occurrence_at,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def test_a_renewal_past_year_9999_is_invalid_input_naming_n() -> None:
    anchor = Anchor(local=datetime(2026, 1, 31, 9), timezone="UTC", every="year")
    assert occurrence(anchor, 7973).year == 9999
    with pytest.raises(OutOfRange) as caught:
        occurrence_at(anchor, 7974)
    assert caught.value.field == "n"
    assert caught.value.value == 7974


def test_a_huge_day_step_is_out_of_range_not_an_overflow() -> None:
    anchor = Anchor(local=datetime(2026, 1, 31, 9), timezone="UTC", every="day", interval=10**9)
    with pytest.raises(OutOfRange):
        occurrence(anchor, 1)


def test_a_wall_time_on_the_last_day_that_is_year_10000_in_utc_is_out_of_range() -> None:
    # 9999-12-31 20:00 in New York is 10000-01-01 01:00 UTC, which datetime cannot hold.
    anchor = Anchor(local=datetime(9999, 12, 30, 20), timezone="America/New_York", every="day")
    with pytest.raises(OutOfRange):
        occurrence_at(anchor, 1)


def test_iterating_ends_the_series_at_the_last_representable_renewal() -> None:
    anchor = Anchor(local=datetime(9999, 10, 31, 9), timezone="UTC")
    assert [o.nominal.month for o in iter_occurrences(anchor)] == [10, 11, 12]


def test_first_after_the_last_renewal_says_the_series_ended() -> None:
    anchor = Anchor(local=datetime(9999, 12, 1, 9), timezone="UTC", every="year")
    with pytest.raises(SeriesEnded):
        first_after(anchor, datetime(9999, 12, 2, tzinfo=UTC))


def test_a_schedule_anchored_near_9999_has_fewer_upcoming_and_then_ends() -> None:
    rule = AnchorRule(local=datetime(9999, 10, 31, 9), timezone="UTC", every="month")
    assert len(upcoming(rule, NOW, 10)) == 3
    assert next_after(rule, datetime(9999, 12, 31, 10, tzinfo=UTC)) is None


@pytest.mark.parametrize(
    "args, option",
    [
        (["--every", "year", "--count", "10000"], "--count"),
        (["--interval", "100000000"], "--interval"),
        (["--every", "day", "--interval", "1000000000"], "--interval"),
    ],
)
def test_renewals_past_9999_exit_2_with_one_line_naming_the_option(
    capsys: pytest.CaptureFixture[str], args: list[str], option: str
) -> None:
    base = ["renewals", "--anchor", "2026-01-31T09:00", "--timezone", "UTC"]
    assert main([*base, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {option}:")
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_renewals_of_an_anchor_on_the_last_day_name_the_anchor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["renewals", "--anchor", "9999-12-31T20:00", "--timezone", "America/New_York"]
    assert main([*args, "--every", "day"]) == 2
    assert capsys.readouterr().err.startswith("error: --anchor:")


@pytest.mark.parametrize(
    "text",
    [
        "0001-01-01T00:00:00+14:00",  # before year 1 in UTC: overflowed
        "9999-12-31T23:59:59-14:00",  # after year 9999 in UTC: overflowed
        "1969-12-31T23:59:59Z",  # before MIN_YEAR
        f"{MAX_YEAR + 1}-01-01T00:00:00Z",  # after MAX_YEAR
    ],
)
def test_instants_outside_the_accepted_years_are_refused_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_instant("run_at", text)
    assert caught.value.field == "run_at"
    assert caught.value.value == text
    assert str(MIN_YEAR) in caught.value.allowed
    with pytest.raises(InvalidInput) as again:
        to_utc("run_at", datetime.fromisoformat(text))
    assert again.value.field == "run_at"


def test_the_bounds_themselves_are_accepted() -> None:
    assert parse_instant("x", f"{MIN_YEAR}-01-01T00:00:00Z").year == MIN_YEAR
    assert parse_instant("x", f"{MAX_YEAR}-12-31T23:59:59Z").year == MAX_YEAR
