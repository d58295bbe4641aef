"""Pure time core: clocks, wall-clock resolution, business calendars, anchored recurrence and
cron in a zone. Nothing here reads the system clock, the environment or the network."""

from recoup.timekeeping.calendar import BusinessCalendar, parse_weekend
from recoup.timekeeping.clock import Clock, SystemClock, VirtualClock
from recoup.timekeeping.instants import format_local, format_utc, parse_instant, require_aware
from recoup.timekeeping.zones import is_ambiguous, is_in_gap, resolve_local, to_local, zone

__all__ = [
    "BusinessCalendar",
    "Clock",
    "SystemClock",
    "VirtualClock",
    "format_local",
    "format_utc",
    "is_ambiguous",
    "is_in_gap",
    "parse_instant",
    "parse_weekend",
    "require_aware",
    "resolve_local",
    "to_local",
    "zone",
]
