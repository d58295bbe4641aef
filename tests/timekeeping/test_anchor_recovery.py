from datetime import date, datetime

import pytest

from recoup.errors import InvalidInput
from recoup.timekeeping.anchor_recovery import DriftedCharge, recover_anchor


def test_it_recovers_the_31st_from_a_clamp_that_ratcheted_to_the_28th() -> None:
    # Chained clamping: Jan 31 → Feb 28 → Mar 28 → Apr 28. The 31st was meant; March and April
    # drifted from the 31st and 30th.
    found = recover_anchor(
        [date(2026, 1, 31), date(2026, 2, 28), date(2026, 3, 28), date(2026, 4, 28)]
    )
    assert (found.day, found.end_of_month, found.interval) == (31, "clamp", 1)
    assert found.drifted == (
        DriftedCharge(n=2, charged=date(2026, 3, 28), expected=date(2026, 3, 31)),
        DriftedCharge(n=3, charged=date(2026, 4, 28), expected=date(2026, 4, 30)),
    )
    assert found.implied(4) == date(2026, 5, 31)


def test_it_recognises_a_chained_roll_forward() -> None:
    # Jan 31 → Mar 1 (Feb 31 rolled) → Apr 1 (should have been Mar 31) → May 1 (Apr 31 rolled).
    found = recover_anchor(
        [date(2026, 1, 31), date(2026, 3, 1), date(2026, 4, 1), date(2026, 5, 1)]
    )
    assert (found.day, found.end_of_month) == (31, "roll-forward")
    assert found.drifted == (
        DriftedCharge(n=2, charged=date(2026, 4, 1), expected=date(2026, 3, 31)),
    )


def test_a_clean_history_has_no_drift() -> None:
    # A 15th anchor never meets a short month.
    found = recover_anchor([date(2026, m, 15) for m in range(1, 7)])
    assert (found.day, found.drifted) == (15, ())


def test_a_history_starting_in_february_still_finds_the_31st() -> None:
    # Feb 28, Mar 31, Apr 30: a clamped 31st with nothing drifted.
    found = recover_anchor([date(2026, 2, 28), date(2026, 3, 31), date(2026, 4, 30)])
    assert (found.day, found.end_of_month, found.drifted) == (31, "clamp", ())


def test_it_infers_a_quarterly_interval() -> None:
    # Every three months from Jan 31; July and October drifted to the 30th.
    found = recover_anchor(
        [date(2026, 1, 31), date(2026, 4, 30), date(2026, 7, 30), date(2026, 10, 30)]
    )
    assert found.interval == 3
    assert [d.charged for d in found.drifted] == [date(2026, 7, 30), date(2026, 10, 30)]


def test_it_matches_charges_to_periods_across_a_skipped_month_and_any_order() -> None:
    # March was never charged; April's charge is period 3 and drifted from Apr 30.
    found = recover_anchor([date(2026, 4, 28), date(2026, 1, 31), date(2026, 2, 28)])
    assert found.periods == (0, 1, 3)
    assert found.drifted == (
        DriftedCharge(n=3, charged=date(2026, 4, 28), expected=date(2026, 4, 30)),
    )


def test_a_given_rule_is_used_as_is() -> None:
    # Told the old system rolled forward, Feb 28 is a drift from Mar 1.
    found = recover_anchor([date(2026, 1, 31), date(2026, 2, 28)], end_of_month="roll-forward")
    assert found.drifted == (
        DriftedCharge(n=1, charged=date(2026, 2, 28), expected=date(2026, 3, 1)),
    )


def test_datetimes_count_by_their_date() -> None:
    # A charge timestamp is reduced to its local date.
    found = recover_anchor([datetime(2026, 1, 31, 9, 0), datetime(2026, 2, 28, 9, 0)])
    assert found.charges == (date(2026, 1, 31), date(2026, 2, 28))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"charges": []}, "charges"),  # nothing to infer from
        ({"charges": [date(2026, 1, 1)], "end_of_month": "nearest"}, "end_of_month"),
        ({"charges": [date(2026, 1, 1)], "interval": 0}, "interval"),
    ],
)
def test_it_refuses_bad_input_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        recover_anchor(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field
