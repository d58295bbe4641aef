import itertools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import InvalidInput, UnknownTimeZone
from recoup.timekeeping.recurrence import (
    Anchor,
    anchor_from,
    first_after,
    first_at_or_after,
    nominal_local,
    occurrence,
    occurrence_at,
    occurrences_between,
)
from tests.timekeeping.strategies import anchors, expected_date, expected_instant

NY = "America/New_York"


def monthly(local: datetime, tz: str = NY, **kwargs: object) -> Anchor:
    return Anchor(local=local, timezone=tz, **kwargs)  # type: ignore[arg-type]


def local_dates(anchor: Anchor, count: int) -> list[date]:
    return [occurrence_at(anchor, n).local.date() for n in range(1, count + 1)]


# --- properties -----------------------------------------------------------------------------


@given(anchors())
def test_it_matches_an_independent_calculation_for_36_renewals(kwargs: dict[str, object]) -> None:
    # Each renewal is the anchor's date moved by n steps with plain calendar arithmetic, its
    # time of day unchanged, resolved by brute force over the zone's offsets (DESIGN's rule).
    anchor = Anchor(**kwargs)  # type: ignore[arg-type]
    for n in range(37):
        day = expected_date(
            anchor.local.date(), anchor.every, n * anchor.interval, anchor.end_of_month
        )
        wall = datetime.combine(day, anchor.local.time())
        assert occurrence(anchor, n) == expected_instant(wall, anchor.timezone), n


@given(anchors())
def test_it_returns_to_the_anchor_day_under_clamp_whenever_the_month_has_it(
    kwargs: dict[str, object],
) -> None:
    # No ratchet: after a short month the renewal goes back to the anchor's day.
    anchor = Anchor(**{**kwargs, "end_of_month": "clamp", "every": "month"})  # type: ignore[arg-type]
    for n in range(37):
        nominal = nominal_local(anchor, n)
        if anchor.local.day <= _month_length(nominal.year, nominal.month):
            assert nominal.day == anchor.local.day, n
        else:
            assert nominal.day == _month_length(nominal.year, nominal.month), n


@given(anchors())
def test_its_occurrences_strictly_increase(kwargs: dict[str, object]) -> None:
    # Gaps and folds shift instants by hours at most; steps are a day or more apart.
    anchor = Anchor(**kwargs)  # type: ignore[arg-type]
    instants = [occurrence(anchor, n) for n in range(37)]
    assert all(a < b for a, b in itertools.pairwise(instants))


@given(anchors(), st.integers(-400, 20_000), st.integers(0, 24 * 60))
def test_first_after_is_the_first_occurrence_past_the_instant(
    kwargs: dict[str, object], days: int, minutes: int
) -> None:
    # Checked against the definition: occurrence n is after the instant and n − 1 is not.
    anchor = Anchor(**kwargs)  # type: ignore[arg-type]
    instant = occurrence(anchor, 0) + timedelta(days=days, minutes=minutes)
    found = first_after(anchor, instant)
    assert found.at > instant
    assert found.at == occurrence(anchor, found.n)
    assert found.n == 0 or occurrence(anchor, found.n - 1) <= instant


@given(anchors(), st.integers(-40, 400), st.integers(1, 400))
def test_occurrences_between_is_the_half_open_window(
    kwargs: dict[str, object], start_days: int, length_days: int
) -> None:
    # Compared with filtering a long enough prefix of the sequence.
    anchor = Anchor(**kwargs)  # type: ignore[arg-type]
    start = occurrence(anchor, 0) + timedelta(days=start_days)
    end = start + timedelta(days=length_days)
    prefix = [occurrence(anchor, n) for n in range(900)]  # > 800 days of daily steps
    assert [o.at for o in occurrences_between(anchor, start, end)] == [
        at for at in prefix if start <= at < end
    ]


def _month_length(year: int, month: int) -> int:
    return (date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1)).day


# --- named cases ----------------------------------------------------------------------------


def test_it_clamps_a_31st_anchor_and_returns_to_the_31st() -> None:
    # Card billing: Jan 31 → Feb 28 → Mar 31 → Apr 30 → May 31, never stuck on the 28th.
    anchor = monthly(datetime(2026, 1, 31, 9, 0))
    assert local_dates(anchor, 4) == [
        date(2026, 2, 28),
        date(2026, 3, 31),
        date(2026, 4, 30),
        date(2026, 5, 31),
    ]


def test_it_clamps_to_february_29_in_a_leap_year() -> None:
    # Stripe's own example: anchored 2028-01-31 bills 2028-02-29.
    assert local_dates(monthly(datetime(2028, 1, 31, 9, 0)), 1) == [date(2028, 2, 29)]


def test_it_rolls_a_missing_day_forward_to_the_first() -> None:
    # roll-forward: Feb "31" is Mar 1, Apr "31" is May 1, and the 31st comes back in between.
    anchor = monthly(datetime(2026, 1, 31, 9, 0), end_of_month="roll-forward")
    assert local_dates(anchor, 4) == [
        date(2026, 3, 1),
        date(2026, 3, 31),
        date(2026, 5, 1),
        date(2026, 5, 31),
    ]


def test_last_day_means_the_last_day_of_every_month_from_any_anchor_day() -> None:
    # An anchor on Jan 30 under last-day still bills Jan 31, Feb 28, Mar 31, Apr 30.
    anchor = monthly(datetime(2026, 1, 30, 9, 0), end_of_month="last-day")
    assert occurrence_at(anchor, 0).local.date() == date(2026, 1, 31)
    assert local_dates(anchor, 3) == [date(2026, 2, 28), date(2026, 3, 31), date(2026, 4, 30)]


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # clamp: Feb 28 in common years, Feb 29 again in 2028.
        ("clamp", [date(2025, 2, 28), date(2026, 2, 28), date(2027, 2, 28), date(2028, 2, 29)]),
        # roll-forward: the missing Feb 29 becomes Mar 1.
        ("roll-forward", [date(2025, 3, 1), date(2026, 3, 1), date(2027, 3, 1), date(2028, 2, 29)]),
        # last-day: the last day of February, whatever its length.
        ("last-day", [date(2025, 2, 28), date(2026, 2, 28), date(2027, 2, 28), date(2028, 2, 29)]),
    ],
)
def test_it_renews_a_february_29_anchor_yearly_under_each_rule(
    rule: str, expected: list[date]
) -> None:
    anchor = monthly(datetime(2024, 2, 29, 9, 0), every="year", end_of_month=rule)
    assert local_dates(anchor, 4) == expected


def test_last_day_differs_from_clamp_for_a_february_28_yearly_anchor() -> None:
    # Feb 28 2027 is February's last day; under last-day the 2028 renewal is Feb 29, under
    # clamp it stays on the 28th.
    base = datetime(2027, 2, 28, 9, 0)
    assert local_dates(monthly(base, every="year", end_of_month="last-day"), 1) == [
        date(2028, 2, 29)
    ]
    assert local_dates(monthly(base, every="year"), 1) == [date(2028, 2, 28)]


def test_a_renewal_inside_the_spring_forward_gap_moves_forward_by_the_gap() -> None:
    # 02:30 does not exist in New York on 2026-03-08: the renewal is 03:30 EDT (07:30Z), and the
    # next month is back at 02:30.
    anchor = monthly(datetime(2026, 2, 8, 2, 30))
    first = occurrence_at(anchor, 1)
    assert first.at == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)
    assert first.local.isoformat() == "2026-03-08T03:30:00-04:00"
    assert first.nominal == datetime(2026, 3, 8, 2, 30)
    assert occurrence_at(anchor, 2).local.isoformat() == "2026-04-08T02:30:00-04:00"


def test_a_renewal_inside_the_fall_back_fold_is_the_edt_instant() -> None:
    # 01:30 happens twice in New York on 2026-11-01; the renewal is the first, EDT (05:30Z).
    anchor = monthly(datetime(2026, 10, 1, 1, 30))
    assert occurrence(anchor, 1) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)


def test_a_half_past_midnight_anchor_in_havana_on_its_dst_day() -> None:
    # Havana jumps from 00:00 to 01:00 on 2026-03-08: 00:30 becomes 01:30 CDT (05:30Z).
    anchor = monthly(datetime(2026, 2, 8, 0, 30), "America/Havana")
    assert occurrence_at(anchor, 1).local.isoformat() == "2026-03-08T01:30:00-04:00"
    assert occurrence(anchor, 1) == datetime(2026, 3, 8, 5, 30, tzinfo=UTC)


def test_lord_howe_shifts_by_thirty_minutes() -> None:
    # Lord Howe springs 02:00 → 02:30 on 2026-10-04 (02:15 becomes 02:45 +11:00) and falls
    # back 02:00 → 01:30 on 2026-04-05 (01:45 is the earlier, +11:00, reading).
    spring = monthly(datetime(2026, 9, 4, 2, 15), "Australia/Lord_Howe")
    assert occurrence_at(spring, 1).local.isoformat() == "2026-10-04T02:45:00+11:00"
    autumn = monthly(datetime(2026, 3, 5, 1, 45), "Australia/Lord_Howe")
    assert occurrence(autumn, 1) == datetime(2026, 4, 4, 14, 45, tzinfo=UTC)


def test_kathmandu_keeps_its_quarter_hour_offset() -> None:
    # +05:45 all year: 09:00 local is 03:15Z every month.
    anchor = monthly(datetime(2026, 1, 15, 9, 0), "Asia/Kathmandu")
    assert {occurrence(anchor, n).time().isoformat() for n in range(12)} == {"03:15:00"}


def test_weekly_and_daily_steps_multiply_by_the_interval() -> None:
    # Every 2 weeks from Monday 2026-01-05, and every 3 days from the same day.
    biweekly = monthly(datetime(2026, 1, 5, 9, 0), every="week", interval=2)
    assert local_dates(biweekly, 2) == [date(2026, 1, 19), date(2026, 2, 2)]
    every_3 = monthly(datetime(2026, 1, 5, 9, 0), every="day", interval=3)
    assert local_dates(every_3, 2) == [date(2026, 1, 8), date(2026, 1, 11)]


def test_first_after_far_in_the_future_does_not_walk_from_the_anchor() -> None:
    # A daily anchor a million days on: the estimate lands within a step or two.
    anchor = monthly(datetime(2026, 1, 1, 9, 0), every="day")
    instant = occurrence(anchor, 0) + timedelta(days=1_000_000, hours=1)
    assert first_after(anchor, instant).n == 1_000_001


def test_first_at_or_after_includes_an_occurrence_at_the_instant() -> None:
    # The instant of occurrence 3 itself: at-or-after returns 3, strictly-after returns 4.
    anchor = monthly(datetime(2026, 1, 31, 9, 0))
    assert first_at_or_after(anchor, occurrence(anchor, 3)).n == 3
    assert first_after(anchor, occurrence(anchor, 3)).n == 4


def test_an_instant_before_the_anchor_gives_the_anchor() -> None:
    # There are no occurrences before n = 0.
    anchor = monthly(datetime(2026, 1, 31, 9, 0))
    assert first_after(anchor, datetime(2000, 1, 1, tzinfo=UTC)).n == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        # An aware anchor would carry a second zone.
        ({"local": datetime(2026, 1, 1, tzinfo=UTC)}, "local"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"every": "fortnight"}, "every"),
        ({"interval": 0}, "interval"),
        # bool is an int to Python, never an interval.
        ({"interval": True}, "interval"),
        ({"end_of_month": "nearest"}, "end_of_month"),
    ],
)
def test_it_refuses_an_invalid_anchor_naming_the_field(
    kwargs: dict[str, object], field: str
) -> None:
    base: dict[str, object] = {"local": datetime(2026, 1, 31, 9, 0), "timezone": NY}
    with pytest.raises(InvalidInput) as caught:
        Anchor(**{**base, **kwargs})  # type: ignore[arg-type]
    assert caught.value.field == field


def test_it_refuses_a_negative_occurrence_number() -> None:
    # n = 0 is the anchor; nothing comes before it.
    with pytest.raises(InvalidInput, match="n: -1"):
        occurrence(monthly(datetime(2026, 1, 31, 9, 0)), -1)


def test_it_refuses_naive_bounds() -> None:
    # A naive bound would be read in the machine's zone.
    anchor = monthly(datetime(2026, 1, 31, 9, 0))
    with pytest.raises(InvalidInput, match="instant"):
        first_after(anchor, datetime(2026, 1, 1))


def test_it_builds_an_anchor_from_a_stored_rule() -> None:
    # The scheduler's AnchorRule carries the same fields; anchor_from validates them.
    @dataclass(frozen=True)
    class Rule:
        local: datetime
        timezone: str
        every: str = "month"
        interval: int = 1
        end_of_month: str = "clamp"

    assert anchor_from(Rule(datetime(2026, 1, 31, 9, 0), NY)) == monthly(datetime(2026, 1, 31, 9))
    with pytest.raises(UnknownTimeZone):
        anchor_from(Rule(datetime(2026, 1, 31, 9, 0), "Nowhere/Else"))
