"""The `restrict` month-end rule: anchors on days 1–28 only, so no renewal is ever moved."""

import calendar
from datetime import date, datetime, time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import InvalidInput
from recoup.timekeeping.recurrence import Anchor, month_day, nominal_local

STEPS = {"month": 1, "year": 12}


def restricted(local: datetime, every: str = "month", interval: int = 1) -> Anchor:
    return Anchor(
        local=local, timezone="UTC", every=every, interval=interval, end_of_month="restrict"
    )


@given(
    st.dates(min_value=date(1970, 1, 1), max_value=date(2400, 12, 31)),
    st.integers(1, 28),
    st.sampled_from(sorted(STEPS)),
    st.integers(1, 12),
    st.integers(0, 600),
)
def test_renewal_n_is_the_anchor_day_n_steps_on(
    start: date, day: int, every: str, interval: int, n: int
) -> None:
    # Computed from the anchor and n alone, by plain month arithmetic: the day never moves.
    anchor = restricted(datetime.combine(start.replace(day=day), time(9, 30)), every, interval)
    index = start.year * 12 + start.month - 1 + STEPS[every] * interval * n
    year, month = divmod(index, 12)
    assert nominal_local(anchor, n) == datetime(year, month + 1, day, 9, 30)


@given(st.integers(1, 28), st.integers(1, 600))
def test_renewal_n_equals_one_step_on_from_renewal_n_minus_1(day: int, n: int) -> None:
    # Under restrict, chaining cannot drift: nothing is ever clamped or rolled.
    anchor = restricted(datetime(2025, 1, day, 8, 0))
    before, after = nominal_local(anchor, n - 1), nominal_local(anchor, n)
    assert after.day == before.day == day
    assert (after.year * 12 + after.month) - (before.year * 12 + before.month) == 1


@st.composite
def month_end_dates(draw: st.DrawFn) -> date:
    """A date on the 29th–31st (built, not filtered: most dates are not)."""
    year, day = draw(st.integers(1970, 2400)), draw(st.integers(29, 31))
    months = [m for m in range(1, 13) if calendar.monthrange(year, m)[1] >= day]
    return date(year, draw(st.sampled_from(months)), day)


@given(month_end_dates(), st.sampled_from(sorted(STEPS)))
def test_an_anchor_on_the_29th_to_31st_is_refused_naming_the_field(start: date, every: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        restricted(datetime.combine(start, time(9, 0)), every)
    assert caught.value.field == "local"
    assert caught.value.value == datetime.combine(start, time(9, 0)).isoformat()
    assert "1 to 28" in caught.value.allowed and "restrict" in caught.value.allowed


@pytest.mark.parametrize("every", ["day", "week"])
def test_day_and_week_steps_are_not_bound_by_a_month_end_rule(every: str) -> None:
    anchor = restricted(datetime(2026, 1, 31, 9, 0), every)
    assert nominal_local(anchor, 1).day == (1 if every == "day" else 7)


@pytest.mark.parametrize("day", [29, 30, 31])
def test_month_day_refuses_a_day_past_28_under_restrict(day: int) -> None:
    with pytest.raises(InvalidInput) as caught:
        month_day(2026, 3, day, "restrict")
    assert (caught.value.field, caught.value.value) == ("day", day)
