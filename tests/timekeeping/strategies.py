"""Hypothesis strategies and an independent brute-force reading of wall times, shared by the
time-core property tests."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, available_timezones

from hypothesis import strategies as st

# Every zone the tzdata in use knows, in a stable order so failures replay.
ALL_ZONES = sorted(available_timezones())

# Local transition moments of 2026 (tzdata 2025b), where gaps and folds are: a property over
# uniformly random wall times would almost never land in one.
TRANSITIONS: list[tuple[str, datetime]] = [
    ("America/New_York", datetime(2026, 3, 8, 2, 0)),  # gap 02:00–03:00
    ("America/New_York", datetime(2026, 11, 1, 1, 0)),  # fold 01:00–02:00
    ("Europe/London", datetime(2026, 3, 29, 1, 0)),  # gap 01:00–02:00
    ("Europe/London", datetime(2026, 10, 25, 1, 0)),  # fold 01:00–02:00
    ("Australia/Lord_Howe", datetime(2026, 10, 4, 2, 0)),  # 30-minute gap
    ("Australia/Lord_Howe", datetime(2026, 4, 5, 1, 30)),  # 30-minute fold
    ("America/Havana", datetime(2026, 3, 8, 0, 0)),  # midnight gap
    ("America/Havana", datetime(2026, 11, 1, 0, 0)),  # fold 00:00–01:00
    ("Antarctica/Troll", datetime(2026, 3, 29, 1, 0)),  # 2-hour gap
    ("Pacific/Chatham", datetime(2026, 9, 27, 2, 45)),  # gap at a quarter hour
    ("America/Santiago", datetime(2026, 9, 6, 0, 0)),  # midnight gap
    ("America/Nuuk", datetime(2026, 3, 28, 23, 0)),  # gap across midnight
    ("Africa/Casablanca", datetime(2026, 3, 22, 2, 0)),  # end of Ramadan "negative DST"
]

EVERY = ("day", "week", "month", "year")
RULES = ("clamp", "roll-forward", "last-day", "restrict")
RESTRICT_MAX_DAY = 28  # restrict refuses monthly and yearly anchors past the 28th


@st.composite
def wall_times(draw: st.DrawFn) -> tuple[datetime, str]:
    """A naive wall time and a zone: near a known transition half of the time, else anywhere
    from 2015 (later than the last whole skipped days, Pacific/Apia and Fakaofo in 2011)."""
    if draw(st.booleans()):
        tz, moment = draw(st.sampled_from(TRANSITIONS))
        return moment + timedelta(minutes=draw(st.integers(-90, 180))), tz
    local = draw(st.datetimes(min_value=datetime(2015, 1, 1), max_value=datetime(2060, 12, 31)))
    return local.replace(second=0, microsecond=0), draw(st.sampled_from(ALL_ZONES))


@st.composite
def anchors(draw: st.DrawFn) -> dict[str, object]:
    """Keyword arguments for an `Anchor`: random, or set up so renewals land on transition
    days at times inside their gap or fold."""
    every = draw(st.sampled_from(EVERY))
    interval = draw(st.integers(1, 4))
    rule = draw(st.sampled_from(RULES))
    if draw(st.booleans()):
        tz, moment = draw(st.sampled_from(TRANSITIONS))
        local = moment + timedelta(minutes=draw(st.integers(0, 120)))
        if every in ("month", "year"):
            back = draw(st.integers(1, 3)) * (1 if every == "month" else 12) * interval
            year, month = divmod(local.year * 12 + local.month - 1 - back, 12)
            length = calendar.monthrange(year, month + 1)[1]
            local = local.replace(year=year, month=month + 1, day=min(local.day, length))
        else:
            local -= timedelta(days=(1 if every == "day" else 7) * interval)
    else:
        day = draw(st.dates(min_value=date(2015, 1, 1), max_value=date(2060, 12, 31)))
        if draw(st.booleans()):  # the interesting end of the month
            last = calendar.monthrange(day.year, day.month)[1]
            day = day.replace(day=draw(st.integers(28, last)))
        at = draw(st.times()).replace(second=0, microsecond=0)
        local = datetime.combine(day, at)
        tz = draw(st.sampled_from(ALL_ZONES))
    if rule == "restrict" and every in ("month", "year") and local.day > RESTRICT_MAX_DAY:
        local = local.replace(day=draw(st.integers(1, RESTRICT_MAX_DAY)))
    return {
        "local": local,
        "timezone": tz,
        "every": every,
        "interval": interval,
        "end_of_month": rule,
    }


def instants_reading(local: datetime, tz: str) -> list[datetime]:
    """Every UTC instant whose wall time in `tz` is `local`, found by brute force over the
    offsets in use within a day either side (no fold arithmetic, no zoneinfo `fold`)."""
    zone = ZoneInfo(tz)
    offsets = _offsets_near(local, zone)
    candidates = {(local - offset).replace(tzinfo=UTC) for offset in offsets}
    return sorted(c for c in candidates if c.astimezone(zone).replace(tzinfo=None) == local)


def expected_instant(local: datetime, tz: str) -> datetime:
    """ARCHITECTURE.md's rule computed independently: the earliest instant reading `local`; in a gap
    (no instant reads it) the wall time read with the offset from before the gap, which lands
    the same distance past the gap."""
    readings = instants_reading(local, tz)
    if readings:
        return readings[0]
    # A gap means the offset went up; the smaller one is the one in force before it.
    before = min(_offsets_near(local, ZoneInfo(tz)))
    return (local - before).replace(tzinfo=UTC)


def _offsets_near(local: datetime, zone: ZoneInfo) -> set[timedelta]:
    found: set[timedelta] = set()
    for hours in range(-30, 31):
        offset = (local + timedelta(hours=hours)).replace(tzinfo=UTC).astimezone(zone).utcoffset()
        assert offset is not None
        found.add(offset)
    return found


def expected_date(start: date, every: str, steps: int, rule: str) -> date:
    """The date `steps` units of `every` after `start`, by plain calendar arithmetic."""
    if every == "day":
        return start + timedelta(days=steps)
    if every == "week":
        return start + timedelta(weeks=steps)
    months = steps if every == "month" else 12 * steps
    year, month0 = divmod(start.year * 12 + start.month - 1 + months, 12)
    month = month0 + 1
    length = calendar.monthrange(year, month)[1]
    if rule == "last-day":
        return date(year, month, length)
    if rule == "restrict":
        assert start.day <= RESTRICT_MAX_DAY  # refused otherwise: nothing to compute
    if start.day <= length:
        return date(year, month, start.day)
    if rule == "clamp":
        return date(year, month, length)
    return date(year, month, length) + timedelta(days=1)  # roll-forward: the 1st of the next


def at(d: date, t: time) -> datetime:
    return datetime.combine(d, t)
