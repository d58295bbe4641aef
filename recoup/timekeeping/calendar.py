"""Business calendars: weekend days, public holidays by country, and extra closed dates."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta

import holidays as holidays_lib

from recoup.errors import InvalidInput

WEEKDAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
SAT_SUN = frozenset({5, 6})

# A business day is at most this many days away, however the weekend and holidays fall; a
# calendar with no open day in that span is refused rather than looped over forever.
_MAX_CLOSED_RUN = 60  # days


def parse_weekend(field_name: str, names: Iterable[str]) -> frozenset[int]:
    """`["fri", "sat"]` → `{4, 5}` (Monday is 0, as `date.weekday()` counts)."""
    days: set[int] = set()
    for name in names:
        key = str(name).strip().lower()[:3]
        if key not in WEEKDAY_NAMES:
            raise InvalidInput(field_name, name, f"expected weekday names from {WEEKDAY_NAMES}")
        days.add(WEEKDAY_NAMES.index(key))
    if len(days) == 7:
        raise InvalidInput(field_name, list(names), "at least one weekday must be a business day")
    return frozenset(days)


@functools.lru_cache(maxsize=256)
def _country_holidays(country: str, subdivision: str | None) -> holidays_lib.HolidayBase:
    try:
        return holidays_lib.country_holidays(country, subdiv=subdivision)
    except NotImplementedError:
        # The package raises the same error for an unknown country and for an unknown
        # subdivision of a known one; tell the caller which field is wrong.
        if country in holidays_lib.list_supported_countries():
            raise InvalidInput(
                "subdivision", subdivision, f"expected a subdivision code of {country}"
            ) from None
        raise InvalidInput(
            "country", country, "expected an ISO 3166-1 alpha-2 code the holidays package knows"
        ) from None
    except ValueError:
        raise InvalidInput(
            "subdivision", subdivision, f"expected a subdivision code of {country}"
        ) from None


@dataclass(frozen=True, kw_only=True)
class BusinessCalendar:
    """Which local dates are open for business.

    `weekend` holds weekday numbers (Mon=0…Sun=6), Saturday and Sunday by default. Holidays
    come from the `holidays` package for `country` (ISO 3166-1 alpha-2) and optional
    `subdivision`, plus `closed` dates of the caller's own. A calendar without a country has
    no public holidays.
    """

    weekend: frozenset[int] = SAT_SUN
    country: str | None = None
    subdivision: str | None = None
    closed: frozenset[date] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not self.weekend <= frozenset(range(7)) or len(self.weekend) == 7:
            raise InvalidInput("weekend", sorted(self.weekend), "weekday numbers 0–6, not all")
        if self.country is not None:
            _country_holidays(self.country.upper(), self.subdivision)  # validates both

    def _holidays(self) -> holidays_lib.HolidayBase | None:
        if self.country is None:
            return None
        return _country_holidays(self.country.upper(), self.subdivision)

    def is_holiday(self, day: date) -> bool:
        if day in self.closed:
            return True
        table = self._holidays()
        return table is not None and day in table

    def is_business_day(self, day: date) -> bool:
        return day.weekday() not in self.weekend and not self.is_holiday(day)

    def next_business_day(self, day: date) -> date:
        """The first business day strictly after `day`."""
        return self.add_business_days(day, 1)

    def on_or_after(self, day: date) -> date:
        """`day` itself if it is a business day, else the next one."""
        return day if self.is_business_day(day) else self.next_business_day(day)

    def add_business_days(self, day: date, k: int) -> date:
        """The k-th business day after `day` (k ≥ 0), whether or not `day` is one; k = 0 is
        `day` itself."""
        if k < 0:
            raise InvalidInput("k", k, "expected a count of business days ≥ 0")
        current = day
        for _ in range(k):
            current = self._step(current)
        return current

    def _step(self, day: date) -> date:
        current = day
        for _ in range(_MAX_CLOSED_RUN):
            current += timedelta(days=1)
            if self.is_business_day(current):
                return current
        raise InvalidInput(
            "calendar", f"{_MAX_CLOSED_RUN} closed days after {day}", "a calendar with open days"
        )

    def holidays_between(self, start: date, end: date) -> list[date]:
        """Closed non-weekend dates in [start, end], for vectorised callers."""
        table = self._holidays()
        found = {d for d in self.closed if start <= d <= end}
        if table is not None:
            for year in range(start.year, end.year + 1):
                table.get(date(year, 1, 1))  # populates the year
            found |= {d for d in table if start <= d <= end}
        return sorted(d for d in found if d.weekday() not in self.weekend)
