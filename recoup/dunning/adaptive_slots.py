"""What an adaptive retry is timed by and made for: a slot (local hour band × weekday × class
of the day of the month), a context (decline class and code, region, network, attempt) and its
levels, and one logged attempt of the two. The model that learns from them is in
`adaptive.py`'s docstring; their counts in `adaptive_counts.py`.

- **Slot**: a local hour band (`band_minutes` wide, anchored at midnight) × weekday × class of
  the day of the month (`DOM_CLASSES`: a payday of the customer's country's convention, the day
  after, two days after, or another day; for a country without a convention, the days around
  the paydays of the conventions we know: 1st–3rd, 14th–17th, 24th–26th, the month's end).
- **Context**: decline class and code, country (else the zone's region), card network, attempt
  number. Counts are kept at five levels, coarse to fine (`context_levels`), so a context seen
  rarely borrows from its parents.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import calendar as month_calendar
import functools
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from recoup.dunning.policy_adaptive import format_minutes
from recoup.dunning.policy_paydays import country_paydays, is_payday
from recoup.errors import InvalidInput
from recoup.timekeeping.calendar import BusinessCalendar

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# Classes of the day of the month: the days since a payday of the customer's country's
# convention (`policy_paydays`, the same data the payday-aware static policy uses), else, for a
# country with none, the days around the paydays of the conventions we know.
PAYDAY_CLASSES = ("payday", "payday+1", "payday+2")
CALENDAR_CLASSES = ("month_start", "mid_month", "late_month", "month_end")
DOM_CLASSES = (*PAYDAY_CLASSES, *CALENDAR_CLASSES, "other")
DOM_LABELS = {
    "payday": "a payday",
    "payday+1": "the day after a payday",
    "payday+2": "2 days after a payday",
    "month_start": "1st–3rd",
    "mid_month": "14th–17th",
    "late_month": "24th–26th",
    "month_end": "last 3 days of the month",
    "other": "other days of the month",
}
# The factors of a slot the model learns a lift for, in `Slot.factor`'s names.
FACTORS = ("band", "weekday", "dom")


@functools.lru_cache(maxsize=64)
def _payroll_calendar(country: str) -> BusinessCalendar:
    try:
        return BusinessCalendar(country=country)
    except InvalidInput:  # a country the holidays package does not know: weekends only
        return BusinessCalendar()


@functools.lru_cache(maxsize=65_536)
def day_of_month_class(day: date, country: str | None = None) -> str:
    """The class of `day` in `DOM_CLASSES` for a customer in `country` (module comment)."""
    rules = country_paydays(country) if country else ()
    if rules and country:
        calendar = _payroll_calendar(country.strip().upper())
        for back, name in enumerate(PAYDAY_CLASSES):
            if is_payday(day - timedelta(days=back), rules, calendar):
                return name
        return "other"
    last = month_calendar.monthrange(day.year, day.month)[1]
    if day.day > last - 3:
        return "month_end"
    if day.day <= 3:
        return "month_start"
    if 14 <= day.day <= 17:
        return "mid_month"
    if 24 <= day.day <= 26:
        return "late_month"
    return "other"


@dataclass(frozen=True, kw_only=True, order=True)
class Slot:
    """A local hour band (`band_start` minutes after midnight, `band_minutes` wide), a weekday
    (0 = Monday) and a day-of-month class."""

    band_start: int
    band_minutes: int
    weekday: int
    dom_class: str

    @property
    def band_label(self) -> str:
        return (
            f"{format_minutes(self.band_start)}–"
            f"{format_minutes(self.band_start + self.band_minutes)}"
        )

    @property
    def label(self) -> str:
        """e.g. "Thursday 18:00–19:00 (14th–17th)"."""
        return f"{WEEKDAYS[self.weekday]} {self.band_label} ({DOM_LABELS[self.dom_class]})"

    def factor(self, name: str) -> int | str:
        match name:
            case "band":
                return self.band_start
            case "weekday":
                return self.weekday
            case _:
                return self.dom_class


def slot_of(local: datetime, band_minutes: int, country: str | None = None) -> Slot:
    """The slot of a local wall reading of a customer in `country`."""
    minute = local.hour * 60 + local.minute
    return Slot(
        band_start=minute - minute % band_minutes,
        band_minutes=band_minutes,
        weekday=local.weekday(),
        dom_class=day_of_month_class(local.date(), country),
    )


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a retry is made for. `region` is the customer's country, else the zone's region."""

    decline_class: str
    decline_code: str
    region: str
    network: str
    attempt: int


ContextKey = tuple[str | int, ...]


def context_levels(context: Context) -> tuple[ContextKey, ...]:
    """The context's keys, coarse to fine: class; + code; + region; + network; + attempt."""
    parts: tuple[str | int, ...] = (
        context.decline_class,
        context.decline_code,
        context.region,
        context.network,
        context.attempt,
    )
    return tuple(parts[: n + 1] for n in range(len(parts)))


@dataclass(frozen=True, kw_only=True)
class AttemptRecord:
    """One logged attempt: its context, its slot, whether it succeeded, and whether it was made
    in the static policy's slot (the prior's evidence)."""

    context: Context
    slot: Slot
    success: bool
    static: bool = False


__all__ = [
    "CALENDAR_CLASSES",
    "DOM_CLASSES",
    "DOM_LABELS",
    "FACTORS",
    "PAYDAY_CLASSES",
    "WEEKDAYS",
    "AttemptRecord",
    "Context",
    "ContextKey",
    "Slot",
    "context_levels",
    "day_of_month_class",
    "slot_of",
]
