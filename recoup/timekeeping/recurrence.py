"""Anchored recurrence: the n-th renewal of a billing anchor, computed from the anchor and n.

An `Anchor` is what a subscription stores: a naive local date-time (occurrence n = 0), an IANA
zone, a step (`every` day/week/month/year times `interval`) and an end-of-month rule. The
n-th occurrence is always derived from the anchor and n, never from occurrence n − 1, so a
31st anchor clamped to February 28 returns to March 31 (no ratchet).

End-of-month rules (they matter only for month and year steps):

- `clamp` (default, as card billing does): a day the month lacks becomes its last day
  (Jan 31 → Feb 28/29 → Mar 31 → Apr 30; Feb 29 yearly → Feb 28 in common years).
- `roll-forward`: a day the month lacks becomes the 1st of the next month (Jan 31 → Mar 1 →
  Mar 31; Feb 29 yearly → Mar 1 in common years). RFC 7529 `SKIP=FORWARD`.
- `last-day`: the anchor means "the last day of every month"; the anchor's own day of month is
  disregarded, so every occurrence (n = 0 included) falls on the last day of its month.
- `restrict`: the anchor must be on day 1–28, which every month has, so no occurrence is ever
  moved; an anchor on the 29th–31st is refused (`InvalidInput` naming `local`) rather than
  given a meaning in short months (processors such as Trust Payments keep schedules off
  those days too).

Local wall times become instants through `zones.resolve_local` (ARCHITECTURE.md's rule: a time in a
spring-forward gap moves forward by the gap; a time in a fall-back fold is the earlier instant).

The end of time: an occurrence past what `datetime` represents (year 9999, local or UTC) does
not exist. Asking for one by number (`nominal_local`, `occurrence`, `occurrence_at`) raises
`InvalidInput` naming `n`; iterating (`iter_occurrences`, `occurrences_between`) ends the series
at the last representable occurrence; `first_after` / `first_at_or_after` raise `InvalidInput`
naming `instant` when no occurrence follows it (the series has ended).
"""

from __future__ import annotations

import calendar
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Final, Protocol

from recoup.errors import InvalidInput
from recoup.timekeeping.instants import require_aware
from recoup.timekeeping.zones import resolve_local, to_local, zone

EVERY: Final = ("day", "week", "month", "year")
END_OF_MONTH_RULES: Final = ("clamp", "roll-forward", "last-day", "restrict")
DEFAULT_END_OF_MONTH: Final = "clamp"
RESTRICT_MAX_DAY: Final = 28  # the last day of month every month has
RESTRICT_ALLOWED: Final = (
    f"expected a day of month from 1 to {RESTRICT_MAX_DAY} under the restrict month-end rule "
    "(clamp, roll-forward and last-day accept 29–31)"
)

_DAYS_PER_STEP: Final = {"day": 1, "week": 7}
_MONTHS_PER_STEP: Final = {"month": 1, "year": 12}


@dataclass(frozen=True, kw_only=True)
class Anchor:
    """A stored recurrence rule; occurrence n = 0 is `local` itself (or, under `last-day`,
    the last day of `local`'s month at the same time of day).

    Validation raises `InvalidInput` naming the field: `local` (must be naive; on day 1–28
    under `restrict` with a month or year step), `timezone` (an IANA name), `every`,
    `interval` (an int ≥ 1), `end_of_month`.
    """

    local: datetime
    timezone: str
    every: str = "month"
    interval: int = 1
    end_of_month: str = DEFAULT_END_OF_MONTH

    def __post_init__(self) -> None:
        if not isinstance(self.local, datetime) or self.local.tzinfo is not None:
            shown = self.local.isoformat() if isinstance(self.local, datetime) else self.local
            raise InvalidInput(
                "local", shown, "expected a naive local date-time such as 2026-01-31T09:00"
            )
        zone(self.timezone, field="timezone")
        if self.every not in EVERY:
            raise InvalidInput("every", self.every, f"expected one of {', '.join(EVERY)}")
        if isinstance(self.interval, bool) or not isinstance(self.interval, int):
            raise InvalidInput("interval", self.interval, "expected an integer ≥ 1")
        if self.interval < 1:
            raise InvalidInput("interval", self.interval, "expected an integer ≥ 1")
        if self.end_of_month not in END_OF_MONTH_RULES:
            allowed = f"expected one of {', '.join(END_OF_MONTH_RULES)}"
            raise InvalidInput("end_of_month", self.end_of_month, allowed)
        # Day and week steps never meet a month's end, so the rule does not bind them.
        restricted = self.end_of_month == "restrict" and self.every in _MONTHS_PER_STEP
        if restricted and self.local.day > RESTRICT_MAX_DAY:
            raise InvalidInput("local", self.local.isoformat(), RESTRICT_ALLOWED)


class AnchorFields(Protocol):
    """Anything that carries an anchor's fields, such as `recoup.jobs.schedules.model.AnchorRule`
    (declared structurally so this pure layer imports nothing above it)."""

    @property
    def local(self) -> datetime: ...
    @property
    def timezone(self) -> str: ...
    @property
    def every(self) -> str: ...
    @property
    def interval(self) -> int: ...
    @property
    def end_of_month(self) -> str: ...


def anchor_from(rule: AnchorFields) -> Anchor:
    """A validated `Anchor` from any record with the same fields (e.g. a stored `AnchorRule`)."""
    return Anchor(
        local=rule.local,
        timezone=rule.timezone,
        every=rule.every,
        interval=rule.interval,
        end_of_month=rule.end_of_month,
    )


@dataclass(frozen=True, kw_only=True)
class Occurrence:
    """Occurrence `n` of an anchor: `at` is the UTC instant, `local` its aware reading in the
    anchor's zone, and `nominal` the naive wall time the rule asked for (it differs from
    `local`'s wall time only when that time fell in a DST gap)."""

    n: int
    at: datetime
    local: datetime
    nominal: datetime


def days_in_month(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def month_day(year: int, month: int, day: int, end_of_month: str) -> date:
    """The date that day-of-month `day` (1–31) means in `year`-`month` under `end_of_month`.

    This is the single place the end-of-month rules live; anchor recovery uses it too.
    Under `restrict` a `day` past 28 is `InvalidInput` naming `day`.
    """
    if end_of_month == "restrict" and day > RESTRICT_MAX_DAY:
        raise InvalidInput("day", day, RESTRICT_ALLOWED)
    last = days_in_month(year, month)
    if end_of_month == "last-day":
        return date(year, month, last)
    if day <= last:
        return date(year, month, day)
    if end_of_month == "roll-forward":
        return date(year, month, last) + timedelta(days=1)
    return date(year, month, last)  # clamp


def add_months(year: int, month: int, months: int) -> tuple[int, int]:
    """(`year`, `month`) moved by `months` (any sign)."""
    index = year * 12 + (month - 1) + months
    return index // 12, index % 12 + 1


def nominal_local(anchor: Anchor, n: int) -> datetime:
    """The naive wall time occurrence `n` asks for, before any DST gap is resolved.

    Computed from the anchor and `n` alone (never from occurrence n − 1).
    """
    _check_n(n)
    start = anchor.local
    try:
        if anchor.every in _DAYS_PER_STEP:
            return start + timedelta(days=_DAYS_PER_STEP[anchor.every] * anchor.interval * n)
        months = _MONTHS_PER_STEP[anchor.every] * anchor.interval * n
        year, month = add_months(start.year, start.month, months)
        day = month_day(year, month, start.day, anchor.end_of_month)
    except (OverflowError, ValueError):
        # `date` refuses years past 9999 with ValueError, `timedelta` arithmetic with
        # OverflowError: either way occurrence n does not exist.
        raise OutOfRange(n) from None
    return datetime.combine(day, start.time())


class OutOfRange(InvalidInput):
    """Occurrence `n` falls past the last representable date (9999-12-31, local or UTC)."""

    def __init__(self, n: int) -> None:
        super().__init__(
            "n", n, f"expected an occurrence on or before {LAST_REPRESENTABLE}; this one is later"
        )


LAST_REPRESENTABLE: Final = "9999-12-31"


class SeriesEnded(InvalidInput):
    """No occurrence follows `instant`: the next one would fall past year 9999."""

    def __init__(self, instant: datetime) -> None:
        super().__init__(
            "instant",
            instant.isoformat(),
            "expected an instant before the anchor's last occurrence (the series has ended)",
        )


def occurrence(anchor: Anchor, n: int) -> datetime:
    """The UTC instant of occurrence `n` ≥ 0 (n = 0 is the anchor itself); `OutOfRange` (an
    `InvalidInput` naming `n`) when it falls past year 9999."""
    return _resolve(nominal_local(anchor, n), anchor, n)


def occurrence_at(anchor: Anchor, n: int) -> Occurrence:
    """Occurrence `n` with its UTC instant, local reading and nominal wall time."""
    nominal = nominal_local(anchor, n)
    tz = zone(anchor.timezone)
    at = _resolve(nominal, anchor, n)
    try:
        local = to_local(at, tz)
    except OverflowError:
        raise OutOfRange(n) from None
    return Occurrence(n=n, at=at, local=local, nominal=nominal)


def _resolve(nominal: datetime, anchor: Anchor, n: int) -> datetime:
    try:
        return resolve_local(nominal, zone(anchor.timezone))
    except OverflowError:  # a wall time on 9999-12-31 that is in year 10000 in UTC
        raise OutOfRange(n) from None


def iter_occurrences(anchor: Anchor, start: int = 0) -> Iterator[Occurrence]:
    """Occurrences `start`, `start` + 1, … (each computed from the anchor), ending only at
    the last one before the end of representable time (year 9999)."""
    _check_n(start)
    n = start
    while True:
        try:
            found = occurrence_at(anchor, n)
        except OutOfRange:
            return
        yield found
        n += 1


def first_after(anchor: Anchor, instant: datetime) -> Occurrence:
    """The first occurrence strictly after `instant` (an aware datetime).

    Estimates n arithmetically from the calendar distance between the anchor and `instant`,
    then corrects by a step or two, so the cost does not grow with that distance.
    """
    return _first(anchor, require_aware("instant", instant).astimezone(UTC), strict=True)


def first_at_or_after(anchor: Anchor, instant: datetime) -> Occurrence:
    """The first occurrence at or after `instant` (an aware datetime)."""
    return _first(anchor, require_aware("instant", instant).astimezone(UTC), strict=False)


def occurrences_between(anchor: Anchor, start: datetime, end: datetime) -> list[Occurrence]:
    """The occurrences at or after `start` and strictly before `end` (half-open, like
    `range`), in order. Both bounds are aware datetimes."""
    end_utc = require_aware("end", end).astimezone(UTC)
    found: list[Occurrence] = []
    first = first_at_or_after(anchor, start)
    for current in iter_occurrences(anchor, first.n):
        if current.at >= end_utc:
            break
        found.append(current)
    return found


def _first(anchor: Anchor, instant: datetime, *, strict: bool) -> Occurrence:
    def before_target(at: datetime) -> bool:
        return at <= instant if strict else at < instant

    n = max(0, _estimate_n(anchor, instant) - 1)
    # Step back while the estimate overshot (a clamp or a gap can move an occurrence by days
    # or hours relative to the plain calendar step); then forward to the first one past it.
    while n > 0 and not _before_or_absent(anchor, n, before_target):
        n -= 1
    try:
        while before_target(occurrence(anchor, n)):
            n += 1
        return occurrence_at(anchor, n)
    except OutOfRange:
        raise SeriesEnded(instant) from None


def _before_or_absent(anchor: Anchor, n: int, before_target: Callable[[datetime], bool]) -> bool:
    """Whether occurrence n is before the target; an occurrence past the end of time is not
    (the search steps back from it)."""
    try:
        return before_target(occurrence(anchor, n))
    except OutOfRange:
        return False


def _estimate_n(anchor: Anchor, instant: datetime) -> int:
    """A lower-ish estimate of the last n whose occurrence is not after `instant`."""
    try:
        local = instant.astimezone(zone(anchor.timezone)).replace(tzinfo=None)
    except OverflowError:  # within hours of year 1 or 9999, past what datetime holds locally
        local = datetime.max if instant.year > 1 else datetime.min
    start = anchor.local
    if anchor.every in _DAYS_PER_STEP:
        days = (local.date() - start.date()).days
        return max(0, days // (_DAYS_PER_STEP[anchor.every] * anchor.interval))
    months = (local.year - start.year) * 12 + (local.month - start.month)
    return max(0, months // (_MONTHS_PER_STEP[anchor.every] * anchor.interval))


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidInput("n", n, "expected an occurrence number ≥ 0 (0 is the anchor)")


__all__ = [
    "DEFAULT_END_OF_MONTH",
    "END_OF_MONTH_RULES",
    "EVERY",
    "RESTRICT_ALLOWED",
    "RESTRICT_MAX_DAY",
    "Anchor",
    "AnchorFields",
    "Occurrence",
    "OutOfRange",
    "SeriesEnded",
    "add_months",
    "anchor_from",
    "days_in_month",
    "first_after",
    "first_at_or_after",
    "iter_occurrences",
    "month_day",
    "nominal_local",
    "occurrence",
    "occurrence_at",
    "occurrences_between",
]
