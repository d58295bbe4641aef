"""Where an attempt lands: the customer's calendar, the reference date and the gap step.

The rules, shared by the planner and the vectorised replay:

- **Calendar.** The customer's country (else the policy's `default_country`) gives the public
  holidays; its weekend comes from the `holidays` package when `weekend_from_country` is set
  (Friday–Saturday in IL), else from the policy.
- **Reference date.** A gap counts from the failure that precedes the attempt, read in the
  customer's zone. Its reference date is the local date of *(failure + 12 h − window start)*: with
  the default 10:00 window, a failure from 22:00 local onwards counts from the next date. So the
  attempt lands in the window nearest to one gap after the failure, never the window a few hours
  away: a failure at 23:58 and one at 00:05 both retry at the window of the day after next
  (about 34 h later), where "local date + 1" would give 10 h for one and 34 h for the other.
  A planned attempt (10:00–11:30) is its own reference date.
- **Gap step.** `business_days = n`: the n-th business day after the reference date (whether or
  not the reference date is one); `days = n`: the reference date + n, moved to the next business
  day when it is closed.
- **Delays** (minimum gap, blackout, card-network limit) move an attempt to the next business day,
  same jitter, until it fits.
"""

from __future__ import annotations

import functools
from datetime import date, datetime, timedelta

import holidays as holidays_lib

from recoup.dunning.policy import DunningPolicy, Gap, GapUnit
from recoup.timekeeping.calendar import BusinessCalendar

HALF_DAY = 43_200  # seconds


@functools.lru_cache(maxsize=256)
def _country_weekend(country: str) -> frozenset[int] | None:
    try:
        table = holidays_lib.country_holidays(country)
    except NotImplementedError:
        return None
    weekend = frozenset(int(d) for d in getattr(table, "weekend", ()))
    return weekend if weekend and len(weekend) < 7 else None


def customer_calendar(
    policy: DunningPolicy, country: str | None, subdivision: str | None = None
) -> BusinessCalendar:
    """The business calendar of a customer in `country` under `policy` (rules above)."""
    code = (country or "").strip().upper() or policy.default_country
    weekend = policy.weekend
    if code and policy.weekend_from_country:
        weekend = _country_weekend(code) or weekend
    return BusinessCalendar(weekend=weekend, country=code, subdivision=subdivision)


def reference_shift_seconds(policy: DunningPolicy) -> int:
    """Add this to a local reading before taking its date (the reference-date rule)."""
    return HALF_DAY - policy.window_start_seconds


def reference_date(local_reading: datetime, policy: DunningPolicy) -> date:
    """The reference date of a failure (or attempt) read at `local_reading` in the customer's
    zone."""
    naive = local_reading.replace(tzinfo=None)
    return (naive + timedelta(seconds=reference_shift_seconds(policy))).date()


def landing_date(reference: date, gap: Gap, calendar: BusinessCalendar) -> date:
    """The local date one `gap` after `reference` (rules above)."""
    match gap.unit:
        case GapUnit.BUSINESS_DAYS:
            return calendar.add_business_days(reference, gap.count)
        case GapUnit.DAYS:
            return calendar.on_or_after(reference + timedelta(days=gap.count))


def window_wall_time(day: date, policy: DunningPolicy, jitter: int) -> datetime:
    """The naive local wall time of an attempt on `day` with `jitter` seconds."""
    return datetime(day.year, day.month, day.day) + timedelta(
        seconds=policy.window_start_seconds + jitter
    )


__all__ = [
    "customer_calendar",
    "landing_date",
    "reference_date",
    "reference_shift_seconds",
    "window_wall_time",
]
