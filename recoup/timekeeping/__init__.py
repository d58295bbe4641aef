"""Pure time core: clocks, wall-clock resolution, business calendars, anchored recurrence and
cron in a zone. Nothing here reads the system clock, the environment or the network."""

from recoup.timekeeping.anchor_recovery import (
    DriftedCharge,
    RecoveredAnchor,
    Unrecovered,
    recover_anchor,
)
from recoup.timekeeping.calendar import BusinessCalendar, parse_weekend
from recoup.timekeeping.clock import Clock, OffsetClock, SystemClock, VirtualClock, reads_wall_time
from recoup.timekeeping.cron import cron_between, cron_next, follows_clock, iter_cron, validate_cron
from recoup.timekeeping.instants import format_local, format_utc, parse_instant, require_aware
from recoup.timekeeping.recurrence import (
    Anchor,
    Occurrence,
    anchor_from,
    first_after,
    first_at_or_after,
    iter_occurrences,
    occurrence,
    occurrence_at,
    occurrences_between,
)
from recoup.timekeeping.zones import (
    is_ambiguous,
    is_in_gap,
    resolve_local,
    start_of_local_day,
    to_local,
    zone,
)

__all__ = [
    "Anchor",
    "BusinessCalendar",
    "Clock",
    "DriftedCharge",
    "Occurrence",
    "OffsetClock",
    "RecoveredAnchor",
    "SystemClock",
    "Unrecovered",
    "VirtualClock",
    "anchor_from",
    "cron_between",
    "cron_next",
    "first_after",
    "first_at_or_after",
    "follows_clock",
    "format_local",
    "format_utc",
    "is_ambiguous",
    "is_in_gap",
    "iter_cron",
    "iter_occurrences",
    "occurrence",
    "occurrence_at",
    "occurrences_between",
    "parse_instant",
    "parse_weekend",
    "reads_wall_time",
    "recover_anchor",
    "require_aware",
    "resolve_local",
    "start_of_local_day",
    "to_local",
    "validate_cron",
    "zone",
]
