"""Wall-clock resolution: (local date-time, IANA zone) → UTC instant, in one place.

The rule (ARCHITECTURE.md, "Semantics that must not drift"):

- a wall time inside a spring-forward **gap** moves forward by the gap: 02:30 on a
  02:00→03:00 day is 03:30 local (RFC 5545 §3.3.5, "interpreted using the UTC offset before
  the gap"; what `zoneinfo` gives with `fold=0`);
- a wall time inside a fall-back **fold** is the earlier of its two instants (`fold=0`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from recoup.errors import InvalidInput, UnknownTimeZone
from recoup.timekeeping.instants import require_aware


@functools.lru_cache(maxsize=1024)
def _load(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def zone(name: str, *, field: str = "timezone") -> ZoneInfo:
    """The IANA zone called `name`; `UnknownTimeZone` (naming `field`) if there is none."""
    if not isinstance(name, str) or not name or name != name.strip():
        raise UnknownTimeZone(field, name)
    try:
        return _load(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise UnknownTimeZone(field, name) from None


def resolve_local(local: datetime, tz: ZoneInfo | str) -> datetime:
    """The UTC instant of the naive wall time `local` in zone `tz` (gap: forward; fold:
    earlier)."""
    if local.tzinfo is not None:
        raise InvalidInput("local", local.isoformat(), "expected a naive wall-clock time")
    tzinfo = zone(tz) if isinstance(tz, str) else tz
    return local.replace(tzinfo=tzinfo, fold=0).astimezone(UTC)


def to_local(instant: datetime, tz: ZoneInfo | str) -> datetime:
    """The aware local reading of the aware `instant` in `tz`."""
    # A naive instant would be read in the machine's zone by `astimezone`: refuse it.
    require_aware("instant", instant)
    tzinfo = zone(tz) if isinstance(tz, str) else tz
    return instant.astimezone(tzinfo)


def is_in_gap(local: datetime, tz: ZoneInfo | str) -> bool:
    """True when the naive wall time `local` does not exist in `tz` (a spring-forward gap)."""
    tzinfo = zone(tz) if isinstance(tz, str) else tz
    round_trip = resolve_local(local, tzinfo).astimezone(tzinfo).replace(tzinfo=None)
    return round_trip != local


def is_ambiguous(local: datetime, tz: ZoneInfo | str) -> bool:
    """True when the naive wall time `local` happens twice in `tz` (a fall-back fold)."""
    tzinfo = zone(tz) if isinstance(tz, str) else tz
    early = local.replace(tzinfo=tzinfo, fold=0).utcoffset()
    late = local.replace(tzinfo=tzinfo, fold=1).utcoffset()
    return early != late and not is_in_gap(local, tzinfo)


def start_of_local_day(day: datetime, tz: ZoneInfo | str) -> datetime:
    """The first instant of the local date of the naive `day` (01:00 where midnight falls in a
    gap, as in America/Havana)."""
    return resolve_local(datetime(day.year, day.month, day.day), tz)


# The zones of each country, as the `tzdata` package ships IANA's tables: zone.tab (each
# country's own zones), else zone1970.tab (zones shared by the countries that agree since 1970).
COUNTRY_TABLES = ("zone.tab", "zone1970.tab")


@functools.cache
def _country_table() -> Mapping[str, tuple[str, ...]]:
    root = resources.files("tzdata").joinpath("zoneinfo")
    for name in COUNTRY_TABLES:
        try:
            text = root.joinpath(name).read_text(encoding="utf-8")
        except OSError:
            continue
        table: dict[str, list[str]] = {}
        for line in text.splitlines():
            parts = line.split("\t")
            if line.startswith("#") or len(parts) < 3:
                continue
            for code in parts[0].split(","):
                zones = table.setdefault(code.strip().upper(), [])
                if parts[2] not in zones:
                    zones.append(parts[2])
        return {code: tuple(zones) for code, zones in table.items()}
    return {}


def country_zones(country: str) -> tuple[str, ...]:
    """The IANA zones of the ISO 3166-1 alpha-2 `country` (none for a code it does not know),
    in the table's order."""
    return _country_table().get(country.strip().upper(), ()) if country else ()


__all__ = [
    "country_zones",
    "is_ambiguous",
    "is_in_gap",
    "resolve_local",
    "start_of_local_day",
    "to_local",
    "zone",
]
