"""Anchor recovery for migrations: from the local dates a subscription was really charged,
infer the day of month it was meant to renew on and its month-end rule, say which charges
drifted, and where the next renewal belongs.

The model. Systems that compute each renewal from the previous one drift: a 31st clamped to
February 28 stays on the 28th (Jan 31, Feb 28, Mar 28, Apr 28), a chained roll-forward walks
onto the 1st (Jan 31, Mar 1, Apr 1). A history is *explained* by an anchor (a day of month, a
month-end rule, a step of whole months and a first period) when the charges fall in distinct,
increasing periods (skipped periods allowed) and each one is either

- *on the anchor*: the date its period falls on, computed from the anchor and the period
  number (`recurrence.month_day`), or
- *chained*: the previous charge moved on by a step per period under the same rule, the bug
  above. A chained charge that is not on the anchor has *drifted*.

The first charge is on the anchor (a history that starts already drifted reads as an anchor
on the day it drifted to: nothing in it says otherwise). Of the explanations, those with the
fewest drifted charges win; when they disagree on a drifted charge or on any of the next
renewals the history is `ambiguous`. Nothing is guessed: too few charges (`insufficient`), no
explanation (`inconsistent`) and a cadence that is not whole months (`unsupported`) are
reported with their reason.

The corrected next renewal is applied at the next renewal with the longer period standing:
never before the date the drifting schedule would charge next (the customer has paid up to
it, so nothing is charged twice in a period and no renewal is pulled earlier); the first
anchored renewal on or after that date, and on or after `as_of` when given.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import date
from typing import Final, Literal

from recoup.errors import InvalidInput
from recoup.timekeeping.recurrence import (
    END_OF_MONTH_RULES,
    RESTRICT_MAX_DAY,
    add_months,
    month_day,
)

MIN_CHARGES: Final = 3  # two gaps: enough to tell a cadence, one gap could be 4 weeks
STATUSES: Final = ("recovered", "insufficient", "ambiguous", "inconsistent", "unsupported")
_DAYS_PER_MONTH: Final = 365.2425 / 12  # mean Gregorian month, in days
_SHORTEST_STEP: Final = 25  # days; a median gap below this is weekly or fortnightly billing
_LOOKAHEAD: Final = 12  # renewals compared when telling tied explanations apart
# Preference among rules that explain a history equally: clamp is the default and what card
# billing does; for a 31st anchor clamp and last-day agree on every month anyway.
_RULE_PREFERENCE: Final = ("clamp", "last-day", "roll-forward", "restrict")

Status = Literal["insufficient", "ambiguous", "inconsistent", "unsupported"]


@dataclass(frozen=True, kw_only=True)
class DriftedCharge:
    """Charge `n` was made on `charged` where the anchor implies `expected`."""

    n: int
    charged: date
    expected: date


@dataclass(frozen=True, kw_only=True)
class RecoveredAnchor:
    """The inferred anchor: renew on `day` (1–31; 31 under `last-day`) every `interval`
    months under `end_of_month`, counting from `first_month` (year, month) as n = 0.

    `expected[i]` is the date the anchor implies for `charges[i]` (sorted), `periods[i]` the
    period it fell in, `drifted` the charges that differ. `also_fits` names the other rules
    that explain the charges as well and predict the same renewals. `next_renewal` is renewal
    `next_n`, the corrected one; `drifting_next` is when the drifting schedule would have
    charged next (None when nothing drifted: the old schedule was anchored too).
    """

    day: int
    end_of_month: str
    interval: int
    first_month: tuple[int, int]
    charges: tuple[date, ...]
    periods: tuple[int, ...]
    expected: tuple[date, ...]
    drifted: tuple[DriftedCharge, ...]
    also_fits: tuple[str, ...]
    next_n: int
    next_renewal: date
    drifting_next: date | None
    status: Literal["recovered"] = "recovered"

    def implied(self, n: int) -> date:
        """The date renewal `n` ≥ 0 falls on under the recovered anchor."""
        return _implied(self.first_month, self.day, self.interval, self.end_of_month, n)


@dataclass(frozen=True, kw_only=True)
class Unrecovered:
    """No anchor is given for these charges, and `reason` says why in a sentence."""

    status: Status
    reason: str
    charges: tuple[date, ...]


@dataclass(frozen=True)
class _Candidate:
    day: int
    rule: str
    interval: int
    first_month: tuple[int, int]


@dataclass(frozen=True)
class _Fit:
    """How far a candidate explains the charges: the period of each of the first
    `len(periods)` of them."""

    candidate: _Candidate
    periods: tuple[int, ...]


def recover_anchor(
    charges: Iterable[date],
    *,
    end_of_month: str | None = None,
    as_of: date | None = None,
    min_charges: int = MIN_CHARGES,
) -> RecoveredAnchor | Unrecovered:
    """Infer the anchor a customer's charges were meant to follow (module docstring).

    `charges` are local dates (a datetime counts by its date) in any order. `end_of_month`
    fixes the rule instead of inferring it; `as_of` (a date on or after the last charge) keeps
    the next renewal from falling before it. `InvalidInput` for an unknown rule, an `as_of`
    before the last charge, or `min_charges` below 2.
    """
    days = sorted(_as_date(c) for c in charges)
    if end_of_month is not None and end_of_month not in END_OF_MONTH_RULES:
        allowed = f"expected one of {', '.join(END_OF_MONTH_RULES)}"
        raise InvalidInput("end_of_month", end_of_month, allowed)
    if isinstance(min_charges, bool) or not isinstance(min_charges, int) or min_charges < 2:
        raise InvalidInput("min_charges", min_charges, "expected an integer ≥ 2")
    if as_of is not None and days and as_of < days[-1]:
        raise InvalidInput(
            "as_of", as_of.isoformat(), f"expected a date on or after the last charge, {days[-1]}"
        )
    found = tuple(days)
    if len(days) < min_charges:
        return Unrecovered(
            status="insufficient",
            reason=f"{_charges(len(days))}; at least {min_charges} are needed to tell a "
            "monthly anchor",
            charges=found,
        )
    for a, b in itertools.pairwise(days):
        if a == b:
            return Unrecovered(status="inconsistent", reason=f"charged twice on {a}", charges=found)
    interval, cadence_problem = _cadence(days)
    if cadence_problem is not None:
        return Unrecovered(status="unsupported", reason=cadence_problem, charges=found)
    rules = (end_of_month,) if end_of_month is not None else _RULE_PREFERENCE
    fits = [_fit(days, c) for c in _candidates(days[0], rules, interval)]
    complete = [f for f in fits if len(f.periods) == len(days)]
    if not complete:
        return Unrecovered(
            status=_unexplained_status(days),
            reason=_unexplained_reason(days, fits, end_of_month),
            charges=found,
        )
    return _choose(days, complete, as_of)


def _cadence(days: list[date]) -> tuple[int, str | None]:
    """The step in whole months the charges follow (the largest that divides every gap, so
    skipped periods do not count as a longer step), or why they follow none. Gaps that are
    not whole months are left to the explanation, which names the charge at fault."""
    gaps = [(b - a).days for a, b in itertools.pairwise(days)]
    typical = statistics.median(gaps)
    if typical < _SHORTEST_STEP:
        return 0, f"charges about every {typical:g} days: only monthly cadences are supported"
    return math.gcd(*(round(gap / _DAYS_PER_MONTH) for gap in gaps)), None


def _candidates(first: date, rules: Iterable[str], interval: int) -> Iterator[_Candidate]:
    """Every (rule, day, first period) that puts renewal 0 on the first charge. The first
    period is the first charge's month, or the one before when a roll-forward carried it
    onto the 1st. Only the charge's own day and the month-end days can land on it."""
    months = [(first.year, first.month), add_months(first.year, first.month, -1)]
    days = sorted({first.day, *range(28, 32)})
    for rule in rules:
        top = RESTRICT_MAX_DAY if rule == "restrict" else 31
        for day in (31,) if rule == "last-day" else (d for d in days if d <= top):
            for first_month in months:
                candidate = _Candidate(day, rule, interval, first_month)
                if _implied(first_month, day, interval, rule, 0) == first:
                    yield candidate


def _fit(days: list[date], candidate: _Candidate) -> _Fit:
    """Walk the charges in order, each on the anchor or chained from the previous charge,
    until one is neither."""
    periods = [0]
    for previous, charged in itertools.pairwise(days):
        n = _period(charged, previous, periods[-1], candidate)
        if n is None:
            break
        periods.append(n)
    return _Fit(candidate, tuple(periods))


def _period(charged: date, previous: date, previous_n: int, c: _Candidate) -> int | None:
    """The period `charged` falls in, on the anchor or chained from `previous` (in period
    `previous_n`); None when neither explains it."""
    months = (charged.year - c.first_month[0]) * 12 + (charged.month - c.first_month[1])
    # A period's date is in its own month, or on the 1st of the next after a roll-forward.
    for shift in (1, 0):
        if (months - shift) % c.interval:
            continue
        n = (months - shift) // c.interval
        if n <= previous_n:
            continue
        if _implied(c.first_month, c.day, c.interval, c.rule, n) == charged:
            return n
        if _chained(previous, n - previous_n, c) == charged:
            return n
    return None


def _chained(start: date, periods: int, c: _Candidate) -> date:
    """`start` moved on one period at a time, each from the last: the drifting schedule."""
    current = start
    for _ in range(periods):
        year, month = add_months(current.year, current.month, c.interval)
        current = month_day(year, month, current.day, c.rule)
    return current


def _choose(
    days: list[date], fits: list[_Fit], as_of: date | None
) -> RecoveredAnchor | Unrecovered:
    results = [_result(days, f, as_of) for f in fits]
    fewest = min(len(r.drifted) for r in results)
    best = sorted((r for r in results if len(r.drifted) == fewest), key=_preference)
    # Explanations that give the same renewals for good are one answer (29–31 under a
    # yearly February anchor; clamp and last-day for the 31st): the preferred one speaks.
    groups: dict[tuple[object, ...], list[RecoveredAnchor]] = {}
    for r in best:
        groups.setdefault((_drift_dates(r), r.next_renewal, _upcoming(r)), []).append(r)
    answers = [members[0] for members in groups.values()]
    # Beyond that, rules may differ where the history cannot tell them apart (they are
    # listed in `also_fits`); the day, the drifted charges and the next renewal may not.
    parting = {(_nominal_day(r), _drift_dates(r), r.next_renewal) for r in answers}
    if len(parting) > 1:
        offers = "; ".join(
            f"day {r.day} under {r.end_of_month} renews next on {r.next_renewal}" for r in answers
        )
        return Unrecovered(
            status="ambiguous",
            reason=f"the charges fit anchors that part ways: {offers}; more history, "
            "or the rule if known, decides",
            charges=tuple(days),
        )
    chosen = answers[0]
    gaps = {(b - a).days for a, b in itertools.pairwise(days)}
    if chosen.drifted and gaps == {28}:
        # Jan 31, Feb 28, Mar 28 is a clamp that drifted, or billing every 4 weeks.
        return Unrecovered(
            status="ambiguous",
            reason="every charge is 28 days after the last: billing every 4 weeks, or day "
            f"{chosen.day} drifting under {chosen.end_of_month}; more history decides",
            charges=tuple(days),
        )
    rules = dict.fromkeys(r.end_of_month for members in groups.values() for r in members)
    return replace(chosen, also_fits=tuple(rule for rule in rules if rule != chosen.end_of_month))


def _preference(r: RecoveredAnchor) -> tuple[int, int]:
    return _RULE_PREFERENCE.index(r.end_of_month), r.day


def _nominal_day(r: RecoveredAnchor) -> int:
    return 31 if r.end_of_month == "last-day" else r.day


def _upcoming(r: RecoveredAnchor) -> tuple[date, ...]:
    return tuple(r.implied(r.next_n + i) for i in range(_LOOKAHEAD))


def _drift_dates(r: RecoveredAnchor) -> tuple[tuple[date, date], ...]:
    # Dates only: two explanations may number the same periods differently.
    return tuple((d.charged, d.expected) for d in r.drifted)


def _result(days: list[date], fit: _Fit, as_of: date | None) -> RecoveredAnchor:
    c = fit.candidate
    expected = tuple(_implied(c.first_month, c.day, c.interval, c.rule, n) for n in fit.periods)
    drifted = tuple(
        DriftedCharge(n=n, charged=charged, expected=e)
        for n, charged, e in zip(fit.periods, days, expected, strict=True)
        if charged != e
    )
    # A drifting schedule charges next one step on from the last charge, and the customer has
    # paid up to that date; an anchored one (nothing drifted) renews at the next period.
    drifting_next = _chained(days[-1], 1, c) if drifted else None
    floors = [d for d in (drifting_next, as_of) if d is not None]
    next_n = _first_on_or_after(c, fit.periods[-1] + 1, max(floors) if floors else None)
    return RecoveredAnchor(
        day=c.day,
        end_of_month=c.rule,
        interval=c.interval,
        first_month=c.first_month,
        charges=tuple(days),
        periods=fit.periods,
        expected=expected,
        drifted=drifted,
        also_fits=(),
        next_n=next_n,
        next_renewal=_implied(c.first_month, c.day, c.interval, c.rule, next_n),
        drifting_next=drifting_next,
    )


def _first_on_or_after(c: _Candidate, start_n: int, floor: date | None) -> int:
    """The first period ≥ `start_n` whose date is on or after `floor`."""
    n = start_n
    if floor is not None:
        months = (floor.year - c.first_month[0]) * 12 + (floor.month - c.first_month[1])
        n = max(start_n, months // c.interval - 1)  # about a period early, then walk
        while n > start_n and _implied(c.first_month, c.day, c.interval, c.rule, n - 1) >= floor:
            n -= 1
        while _implied(c.first_month, c.day, c.interval, c.rule, n) < floor:
            n += 1
    return n


def _unexplained_status(days: list[date]) -> Status:
    gaps = {(b - a).days for a, b in itertools.pairwise(days)}
    # Every 4 weeks (or any fixed number of days) passes for monthly at first sight.
    return "unsupported" if len(gaps) == 1 else "inconsistent"


def _unexplained_reason(days: list[date], fits: list[_Fit], rule: str | None) -> str:
    gaps = {(b - a).days for a, b in itertools.pairwise(days)}
    if len(gaps) == 1:
        return f"charges every {gaps.pop()} days, not on a day of the month"
    furthest = max(fits, key=lambda f: len(f.periods), default=None)
    rules = f"the {rule} rule" if rule else "any month-end rule"
    if furthest is None:  # only under restrict: the first charge is past the 28th
        return f"no anchor day under {rules} puts a renewal on the first charge, {days[0]}"
    c = furthest.candidate
    stuck = days[len(furthest.periods)]
    return (
        f"no anchor day under {rules} explains the charge on {stuck}; the charges before it "
        f"fit day {c.day} under {c.rule}"
    )


def _charges(count: int) -> str:
    return f"{count} charge" if count == 1 else f"{count} charges"


def _implied(first_month: tuple[int, int], day: int, interval: int, rule: str, n: int) -> date:
    year, month = add_months(first_month[0], first_month[1], n * interval)
    return month_day(year, month, day, rule)


def _as_date(value: date) -> date:
    if not isinstance(value, date):
        raise InvalidInput("charges", value, "expected local dates")
    # A datetime is a date too; only its local date matters here.
    return date(value.year, value.month, value.day)


__all__ = [
    "MIN_CHARGES",
    "STATUSES",
    "DriftedCharge",
    "RecoveredAnchor",
    "Unrecovered",
    "recover_anchor",
]
