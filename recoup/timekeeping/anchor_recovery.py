"""Anchor recovery for migrations: from the local dates a subscription was really charged,
infer the day of month it was meant to renew on, and say which past charges drifted.

Systems that compute each renewal from the previous one drift: a 31st anchor clamped to
February 28 stays on the 28th (Jan 31, Feb 28, Mar 28, Apr 28), and a chained roll-forward
walks onto the 1st (Jan 31, Mar 1, Apr 1). Both bugs only ever move a charge earlier in the
month or onto the 1st of the next one, never later in the month, so the largest day of month
among the charges is the intended anchor day. The end-of-month rule is then the one under
which the most charges fall exactly where the anchor puts them.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from recoup.errors import InvalidInput
from recoup.timekeeping.recurrence import END_OF_MONTH_RULES, add_months, month_day

_DAYS_PER_MONTH = 365.2425 / 12  # mean Gregorian month, in days

# Preference when rules explain the charges equally well: clamp is the default and what card
# billing does; for a 31st anchor clamp and last-day agree on every month anyway.
_RULE_PREFERENCE = ("clamp", "last-day", "roll-forward")


@dataclass(frozen=True, kw_only=True)
class DriftedCharge:
    """Charge `n` was made on `charged` where the anchor implies `expected`."""

    n: int
    charged: date
    expected: date


@dataclass(frozen=True, kw_only=True)
class RecoveredAnchor:
    """The inferred anchor: renew on `day` (1–31) every `interval` months under `end_of_month`,
    counting from `first_month` (year, month) as n = 0.

    `expected[i]` is the date the anchor implies for `charges[i]` (sorted), `periods[i]` the
    occurrence number it was matched to, and `drifted` lists the charges that differ.
    """

    day: int
    end_of_month: str
    interval: int
    first_month: tuple[int, int]
    charges: tuple[date, ...]
    periods: tuple[int, ...]
    expected: tuple[date, ...]
    drifted: tuple[DriftedCharge, ...]

    def implied(self, n: int) -> date:
        """The date occurrence `n` ≥ 0 falls on under the recovered anchor."""
        return _implied(self.first_month, self.day, self.interval, self.end_of_month, n)


def recover_anchor(
    charges: Iterable[date], *, end_of_month: str | None = None, interval: int | None = None
) -> RecoveredAnchor:
    """Infer the intended monthly anchor from the local dates of past charges.

    `charges` may come in any order and may skip periods (each charge is matched to the
    nearest occurrence). `end_of_month` and `interval` (in months) are inferred unless given.
    `InvalidInput` for no charges, an unknown rule or an interval below 1.
    """
    days = sorted(_as_date(c) for c in charges)
    if not days:
        raise InvalidInput("charges", [], "expected at least one charge date")
    if end_of_month is not None and end_of_month not in END_OF_MONTH_RULES:
        raise InvalidInput(
            "end_of_month", end_of_month, f"expected one of {', '.join(END_OF_MONTH_RULES)}"
        )
    if interval is not None and (isinstance(interval, bool) or interval < 1):
        raise InvalidInput("interval", interval, "expected a number of months ≥ 1")
    step = interval if interval is not None else _infer_interval(days)
    day = max(d.day for d in days)
    first_month = (days[0].year, days[0].month)
    rules = (end_of_month,) if end_of_month is not None else _RULE_PREFERENCE

    best: RecoveredAnchor | None = None
    for rule in rules:
        candidate = _fit(days, day, rule, step, first_month)
        if best is None or len(candidate.drifted) < len(best.drifted):
            best = candidate
    assert best is not None  # rules is never empty
    return best


def _fit(
    days: list[date], day: int, rule: str, interval: int, first_month: tuple[int, int]
) -> RecoveredAnchor:
    periods: list[int] = []
    expected: list[date] = []
    for charged in days:
        n, implied = _nearest(charged, first_month, day, interval, rule)
        periods.append(n)
        expected.append(implied)
    drifted = tuple(
        DriftedCharge(n=n, charged=c, expected=e)
        for n, c, e in zip(periods, days, expected, strict=True)
        if c != e
    )
    return RecoveredAnchor(
        day=day,
        end_of_month=rule,
        interval=interval,
        first_month=first_month,
        charges=tuple(days),
        periods=tuple(periods),
        expected=tuple(expected),
        drifted=drifted,
    )


def _nearest(
    charged: date, first_month: tuple[int, int], day: int, interval: int, rule: str
) -> tuple[int, date]:
    """The occurrence closest to `charged` (the earlier one on a tie)."""
    months = (charged.year - first_month[0]) * 12 + (charged.month - first_month[1])
    estimate = max(0, months // interval)
    candidates = [n for n in (estimate - 1, estimate, estimate + 1) if n >= 0]
    return min(
        ((n, _implied(first_month, day, interval, rule, n)) for n in candidates),
        key=lambda pair: (abs((pair[1] - charged).days), pair[0]),
    )


def _implied(first_month: tuple[int, int], day: int, interval: int, rule: str, n: int) -> date:
    year, month = add_months(first_month[0], first_month[1], n * interval)
    return month_day(year, month, day, rule)


def _infer_interval(days: list[date]) -> int:
    if len(days) < 2:
        return 1
    # The median gap, so that a skipped period or a charge retried twice does not skew it.
    gap = statistics.median((b - a).days for a, b in itertools.pairwise(days))
    return max(1, round(gap / _DAYS_PER_MONTH))


def _as_date(value: date) -> date:
    if not isinstance(value, date):
        raise InvalidInput("charges", value, "expected local dates")
    # A datetime is a date too; only its local date matters here.
    return date(value.year, value.month, value.day)


__all__ = ["DriftedCharge", "RecoveredAnchor", "recover_anchor"]
