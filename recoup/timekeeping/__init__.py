"""Pure time core: clocks, wall-clock resolution, business calendars, anchored recurrence and
cron in a zone. Nothing here reads the system clock, the environment or the network."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recoup.lazy import lazy_getattr

# The exports load their modules on first use (`recoup.lazy`); `_HOMES` is the one list, which
# the TYPE_CHECKING imports and `__all__` repeat (tests/test_packaging.py holds them to it).
if TYPE_CHECKING:
    from recoup.timekeeping.anchor_recovery import (
        DriftedCharge,
        RecoveredAnchor,
        Unrecovered,
        recover_anchor,
    )
    from recoup.timekeeping.calendar import BusinessCalendar, parse_weekend
    from recoup.timekeeping.clock import (
        Clock,
        OffsetClock,
        SystemClock,
        VirtualClock,
        reads_wall_time,
    )
    from recoup.timekeeping.cron import (
        cron_between,
        cron_next,
        follows_clock,
        iter_cron,
        validate_cron,
    )
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

_HOMES = {
    "Anchor": "recoup.timekeeping.recurrence",
    "BusinessCalendar": "recoup.timekeeping.calendar",
    "Clock": "recoup.timekeeping.clock",
    "DriftedCharge": "recoup.timekeeping.anchor_recovery",
    "Occurrence": "recoup.timekeeping.recurrence",
    "OffsetClock": "recoup.timekeeping.clock",
    "RecoveredAnchor": "recoup.timekeeping.anchor_recovery",
    "SystemClock": "recoup.timekeeping.clock",
    "Unrecovered": "recoup.timekeeping.anchor_recovery",
    "VirtualClock": "recoup.timekeeping.clock",
    "anchor_from": "recoup.timekeeping.recurrence",
    "cron_between": "recoup.timekeeping.cron",
    "cron_next": "recoup.timekeeping.cron",
    "first_after": "recoup.timekeeping.recurrence",
    "first_at_or_after": "recoup.timekeeping.recurrence",
    "follows_clock": "recoup.timekeeping.cron",
    "format_local": "recoup.timekeeping.instants",
    "format_utc": "recoup.timekeeping.instants",
    "is_ambiguous": "recoup.timekeeping.zones",
    "is_in_gap": "recoup.timekeeping.zones",
    "iter_cron": "recoup.timekeeping.cron",
    "iter_occurrences": "recoup.timekeeping.recurrence",
    "occurrence": "recoup.timekeeping.recurrence",
    "occurrence_at": "recoup.timekeeping.recurrence",
    "occurrences_between": "recoup.timekeeping.recurrence",
    "parse_instant": "recoup.timekeeping.instants",
    "parse_weekend": "recoup.timekeeping.calendar",
    "reads_wall_time": "recoup.timekeeping.clock",
    "recover_anchor": "recoup.timekeeping.anchor_recovery",
    "require_aware": "recoup.timekeeping.instants",
    "resolve_local": "recoup.timekeeping.zones",
    "start_of_local_day": "recoup.timekeeping.zones",
    "to_local": "recoup.timekeeping.zones",
    "validate_cron": "recoup.timekeeping.cron",
    "zone": "recoup.timekeeping.zones",
}
__getattr__ = lazy_getattr(__name__, _HOMES)

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
