import calendar
import itertools
from datetime import date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import InvalidInput
from recoup.timekeeping.anchor_recovery import (
    DriftedCharge,
    RecoveredAnchor,
    Unrecovered,
    recover_anchor,
)


def recovered(charges: list[date], **kwargs: object) -> RecoveredAnchor:
    found = recover_anchor(charges, **kwargs)  # type: ignore[arg-type]
    assert isinstance(found, RecoveredAnchor), found
    return found


def unrecovered(charges: list[date], **kwargs: object) -> Unrecovered:
    found = recover_anchor(charges, **kwargs)  # type: ignore[arg-type]
    assert isinstance(found, Unrecovered), found
    return found


# --- an independent calendar, for the generators below ------------------------------------


def month_after(year: int, month: int, months: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + months
    return index // 12, index % 12 + 1


def anchored(year: int, month: int, day: int, rule: str) -> date:
    """Day `day` of `year`-`month` under `rule`, straight from the calendar."""
    length = calendar.monthrange(year, month)[1]
    if rule == "last-day":
        return date(year, month, length)
    if day <= length:
        return date(year, month, day)
    if rule == "roll-forward":
        y, m = month_after(year, month, 1)
        return date(y, m, 1)
    return date(year, month, length)


def clamp_chain(start: date, count: int) -> list[date]:
    """`previous + 1 month`, clamped, `count` times: the drifting schedule."""
    found = [start]
    for _ in range(count - 1):
        y, m = month_after(found[-1].year, found[-1].month, 1)
        found.append(anchored(y, m, found[-1].day, "clamp"))
    return found


# --- the seed's cases (docs/reference time semantics, B6) ---------------------------------


def test_a_31st_clamped_by_chaining_is_recovered_and_renews_on_may_31() -> None:
    # Anchor 2025-01-31 chained: 02-28, 03-28, 04-28. March and April drifted from the 31st
    # and the 30th; the old schedule would charge next on May 28, the corrected one on May 31
    # (the current period grows by three days; nothing is pulled earlier).
    found = recovered([date(2025, 1, 31), date(2025, 2, 28), date(2025, 3, 28), date(2025, 4, 28)])
    assert (found.day, found.end_of_month, found.interval) == (31, "clamp", 1)
    assert found.drifted == (
        DriftedCharge(n=2, charged=date(2025, 3, 28), expected=date(2025, 3, 31)),
        DriftedCharge(n=3, charged=date(2025, 4, 28), expected=date(2025, 4, 30)),
    )
    assert (found.drifting_next, found.next_renewal, found.next_n) == (
        date(2025, 5, 28),
        date(2025, 5, 31),
        4,
    )


def test_a_march_31st_drifting_to_the_30th_after_april_is_recovered() -> None:
    # Anchor 2025-03-31 chained: 04-30, 05-30, 06-30. April and June are where the 31st
    # clamps anyway (30-day months); May drifted. Next: Jul 31, not the drifting Jul 30.
    found = recovered([date(2025, 3, 31), date(2025, 4, 30), date(2025, 5, 30), date(2025, 6, 30)])
    assert (found.day, found.end_of_month) == (31, "clamp")
    assert found.drifted == (
        DriftedCharge(n=2, charged=date(2025, 5, 30), expected=date(2025, 5, 31)),
    )
    assert (found.drifting_next, found.next_renewal) == (date(2025, 7, 30), date(2025, 7, 31))


def test_a_leap_year_february_29_clamp_drift_is_recovered() -> None:
    # 2024: Jan 31 → Feb 29 → (chained) Mar 29, Apr 29.
    found = recovered([date(2024, 1, 31), date(2024, 2, 29), date(2024, 3, 29), date(2024, 4, 29)])
    assert found.day == 31
    assert [d.charged for d in found.drifted] == [date(2024, 3, 29), date(2024, 4, 29)]
    assert found.next_renewal == date(2024, 5, 31)


def test_a_yearly_february_29_anchor_is_kept_through_common_years() -> None:
    found = recovered([date(2024, 2, 29), date(2025, 2, 28), date(2026, 2, 28), date(2027, 2, 28)])
    assert (found.day, found.interval, found.drifted) == (29, 12, ())
    assert found.next_renewal == date(2028, 2, 29)


def test_a_correct_history_has_no_drift_and_renews_at_the_next_period() -> None:
    found = recovered([date(2026, 1, 31), date(2026, 2, 28), date(2026, 3, 31), date(2026, 4, 30)])
    assert (found.day, found.end_of_month, found.drifted) == (31, "clamp", ())
    assert found.also_fits == ("last-day",)  # the same renewals for a 31st, for good
    assert (found.next_renewal, found.drifting_next) == (date(2026, 5, 31), None)


def test_a_mid_month_anchor_fits_every_rule_but_last_day() -> None:
    found = recovered([date(2026, m, 15) for m in range(1, 7)])
    assert (found.day, found.end_of_month, found.drifted) == (15, "clamp", ())
    assert found.also_fits == ("roll-forward", "restrict")


def test_a_chained_roll_forward_keeps_its_paid_period_standing() -> None:
    # Jan 31 → Mar 1 (Feb "31") → Apr 1 (should be Mar 31) → May 1 (Apr "31"). The customer
    # has paid until Jun 1, so May 31 would be early: the next anchored date after it is
    # Jul 1 (Jun "31"), a longer period.
    found = recovered([date(2026, 1, 31), date(2026, 3, 1), date(2026, 4, 1), date(2026, 5, 1)])
    assert (found.day, found.end_of_month) == (31, "roll-forward")
    assert found.drifted == (
        DriftedCharge(n=2, charged=date(2026, 4, 1), expected=date(2026, 3, 31)),
    )
    assert (found.drifting_next, found.next_renewal) == (date(2026, 6, 1), date(2026, 7, 1))


def test_a_quarterly_history_keeps_its_step_and_its_drift() -> None:
    found = recovered([date(2026, 1, 31), date(2026, 4, 30), date(2026, 7, 30), date(2026, 10, 30)])
    assert found.interval == 3
    assert [d.charged for d in found.drifted] == [date(2026, 7, 30), date(2026, 10, 30)]
    assert found.next_renewal == date(2027, 1, 31)


def test_charges_match_periods_across_a_skipped_month_in_any_order() -> None:
    # March was not charged: the chain went on from Feb 28 to Apr 28 through Mar 28.
    found = recovered([date(2025, 4, 28), date(2025, 1, 31), date(2025, 2, 28)])
    assert found.periods == (0, 1, 3)
    assert found.drifted == (
        DriftedCharge(n=3, charged=date(2025, 4, 28), expected=date(2025, 4, 30)),
    )


def test_as_of_moves_the_next_renewal_to_the_first_one_not_before_it() -> None:
    history = [date(2025, 1, 31), date(2025, 2, 28), date(2025, 3, 28), date(2025, 4, 28)]
    assert recovered(history, as_of=date(2025, 9, 3)).next_renewal == date(2025, 9, 30)
    assert recovered(history, as_of=date(2025, 5, 31)).next_renewal == date(2025, 5, 31)
    assert recovered(history, as_of=date(2025, 4, 28)).next_renewal == date(2025, 5, 31)


def test_datetimes_count_by_their_date() -> None:
    found = recovered([datetime(2026, m, 10, 9, 0) for m in (1, 2, 3)])
    assert found.charges == (date(2026, 1, 10), date(2026, 2, 10), date(2026, 3, 10))


def test_a_given_rule_is_the_only_one_tried() -> None:
    found = recovered([date(2026, m, 15) for m in (1, 2, 3)], end_of_month="restrict")
    assert (found.end_of_month, found.also_fits) == ("restrict", ())
    refused = unrecovered(
        [date(2026, 1, 31), date(2026, 2, 28), date(2026, 3, 31)], end_of_month="restrict"
    )
    assert refused.status == "inconsistent" and "restrict" in refused.reason


# --- what is not recovered, and why --------------------------------------------------------


@pytest.mark.parametrize(
    ("charges", "status", "says"),
    [
        # Too little history: two gaps are needed to tell a month from 4 weeks.
        ([], "insufficient", "0 charges"),
        ([date(2026, 1, 31), date(2026, 2, 28)], "insufficient", "2 charges"),
        # A retry three days late on the 18th: no anchor puts a charge there.
        (
            [date(2026, 1, 15), date(2026, 2, 15), date(2026, 3, 18), date(2026, 4, 15)],
            "inconsistent",
            "2026-03-18",
        ),
        ([date(2026, 1, 15), date(2026, 2, 15), date(2026, 2, 15)], "inconsistent", "twice"),
        # Weekly, and every 4 weeks (which looks monthly from afar).
        ([date(2026, 1, d) for d in (5, 12, 19, 26)], "unsupported", "every 7 days"),
        (
            [date(2026, 1, 5), date(2026, 2, 2), date(2026, 3, 2), date(2026, 3, 30)],
            "unsupported",
            "every 28 days",
        ),
        # Jan 31, Feb 28, Mar 28: a drifted 31st, or every 4 weeks.
        ([date(2025, 1, 31), date(2025, 2, 28), date(2025, 3, 28)], "ambiguous", "4 weeks"),
        # Jul 31, Aug 31, Oct 31: clamp renews Nov 30, roll-forward Dec 1.
        ([date(2025, 7, 31), date(2025, 8, 31), date(2025, 10, 31)], "ambiguous", "2025-12-01"),
        # Every two months on month ends in 30-day months: the 30th or the 31st?
        ([date(2026, 2, 28), date(2026, 4, 30), date(2026, 6, 30)], "ambiguous", "day 30"),
    ],
)
def test_histories_no_anchor_settles_are_reported_with_a_reason(
    charges: list[date], status: str, says: str
) -> None:
    found = unrecovered(charges)
    assert found.status == status
    assert says in found.reason


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"charges": [date(2026, 1, 1)], "end_of_month": "nearest"}, "end_of_month"),
        ({"charges": [date(2026, 1, 1)], "min_charges": 1}, "min_charges"),
        ({"charges": ["2026-01-01"]}, "charges"),
        ({"charges": [date(2026, 3, 1)], "as_of": date(2026, 2, 1)}, "as_of"),
    ],
)
def test_it_refuses_bad_input_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        recover_anchor(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


# --- properties ----------------------------------------------------------------------------

RULES = ("clamp", "roll-forward", "last-day", "restrict")


@st.composite
def anchors(draw: st.DrawFn) -> tuple[int, int, int, str]:
    """(year, month, day, rule) of a monthly anchor; day 28–31 half of the time."""
    year = draw(st.integers(1990, 2200))
    month = draw(st.integers(1, 12))
    rule = draw(st.sampled_from(RULES))
    top = 28 if rule == "restrict" else 31
    day = draw(st.integers(min(28, top), top) | st.integers(1, top))
    return year, month, day, rule


def next_renewals_by_rule(
    year: int, month: int, day: int, history: list[date], floor: date
) -> set[date]:
    """For every rule whose anchored dates from (`year`, `month`, `day`) are exactly `history`,
    its first renewal after the history on or after `floor`. Empty when the history drifted;
    more than one date when it cannot tell apart rules that part ways at the next renewal
    (a 29th charged from March to December: February 28 or March 1?)."""
    found = set()
    for rule in RULES:
        if rule == "restrict" and day > 28:
            continue
        dates = (anchored(*month_after(year, month, n), day, rule) for n in itertools.count())
        if list(itertools.islice(dates, len(history))) == history:
            found.add(next(d for d in dates if d >= floor))
    return found


def recovered_unless_undecided(
    history: list[date], nexts: set[date], **kwargs: object
) -> RecoveredAnchor | None:
    """The recovered anchor, or None after checking the history was rightly `ambiguous`."""
    found = recover_anchor(history, **kwargs)  # type: ignore[arg-type]
    if len(nexts) > 1:
        assert isinstance(found, Unrecovered) and found.status == "ambiguous", found
        assert all(d.isoformat() in found.reason for d in nexts)
        return None
    assert isinstance(found, RecoveredAnchor), found
    return found


@given(anchors(), st.integers(3, 30))
def test_any_anchored_history_recovers_its_anchor_with_no_drift(
    anchor: tuple[int, int, int, str], count: int
) -> None:
    year, month, day, rule = anchor
    day = 31 if rule == "last-day" else day  # a last-day anchor means the 31st, clamped
    months = [month_after(year, month, n) for n in range(count + 1)]
    history = [anchored(y, m, day, rule) for y, m in months[:count]]
    nexts = next_renewals_by_rule(year, month, day, history, history[-1] + timedelta(days=1))
    found = recovered_unless_undecided(history, nexts)
    if found is None:
        return
    assert found.drifted == ()
    assert found.expected == tuple(history)
    assert rule in (found.end_of_month, *found.also_fits)
    assert found.day == day
    # Nothing drifted, so the next renewal is simply the next period's date.
    assert found.next_renewal == anchored(*months[count], day, rule)
    assert found.drifting_next is None


@given(anchors(), st.integers(4, 30))
def test_a_chained_clamp_history_recovers_the_original_anchor(
    anchor: tuple[int, int, int, str], count: int
) -> None:
    year, month, day, _ = anchor
    day = min(day, calendar.monthrange(year, month)[1])  # the anchor is a charged date
    history = clamp_chain(date(year, month, day), count)
    nexts = next_renewals_by_rule(year, month, day, history, history[-1] + timedelta(days=1))
    found = recovered_unless_undecided(history, nexts)
    if found is None:  # the chain never met a short month: nothing drifted to tell by
        return
    assert (found.day, found.end_of_month) == (day, "clamp")
    months = [month_after(year, month, n) for n in range(count + 1)]
    truth = [anchored(y, m, day, "clamp") for y, m in months]
    assert [d.charged for d in found.drifted] == [
        c for c, t in zip(history, truth, strict=False) if c != t
    ]
    assert all(d.expected == truth[d.n] for d in found.drifted)
    # Applied at the next renewal: a clamp chain only ever charges early in the month, so the
    # next period's true date is never before the date the chain would charge next.
    chain_next = clamp_chain(history[-1], 2)[1]
    assert found.next_renewal == truth[count] >= chain_next
    assert found.drifting_next == (chain_next if found.drifted else None)


@given(anchors(), st.integers(4, 24), st.integers(0, 4000))
def test_the_next_renewal_is_the_first_anchored_date_past_both_floors(
    anchor: tuple[int, int, int, str], count: int, later: int
) -> None:
    # Not before `as_of`, and not before the date the drifting schedule would charge next
    # (what the customer has paid up to), whichever is later.
    year, month, day, _ = anchor
    day = min(day, calendar.monthrange(year, month)[1])
    history = clamp_chain(date(year, month, day), count)
    as_of = history[-1] + timedelta(days=later)
    nexts = next_renewals_by_rule(year, month, day, history, max(as_of, history[-1]))
    found = recovered_unless_undecided(history, nexts, as_of=as_of)
    if found is None:
        return
    paid_through = clamp_chain(history[-1], 2)[1]
    assert found.drifting_next == (paid_through if found.drifted else None)
    floor = max(as_of, paid_through) if found.drifted else as_of
    truth = (
        anchored(*month_after(year, month, n), day, "clamp")
        for n in range(count, count + later // 27 + 3)
    )
    assert found.next_renewal == next(t for t in truth if t >= floor)
