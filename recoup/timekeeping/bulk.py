"""Wall-clock conversion in bulk: one zone's UTC offsets for arrays of instants, and arrays of
local wall times resolved to UTC instants, with numpy.

Element by element the results equal `zoneinfo`'s: `ZoneOffsets.at` is
`datetime.fromtimestamp(t, tz).utcoffset()`, and `ZoneOffsets.walls_to_utc` is
`recoup.timekeeping.zones.resolve_local` (the one DST rule: a wall time in a gap moves forward
by the gap, one in a fold is its earlier instant).

Units: integer seconds. An instant is Unix time; a wall time is seconds since 1970-01-01 00:00
*local*, i.e. `local_day * 86_400 + second_of_day`, so `(instant + offset) // 86_400` is the
local day of an instant.

The cost follows the distinct days, not the elements: offsets are computed once per distinct
UTC day (bisecting for the day's DST transition when it has one), and wall times once per
distinct local day, where a window of wall times (`window_start` to `window_start + span`
seconds after local midnight) that no offset change crosses shares one offset. Wall times
outside the window, or on a day whose window meets a change, are resolved one by one.

Assumes at most one offset change per UTC day, which every IANA zone satisfies in the years
Recoup plans for (the last whole skipped days were Pacific/Apia's and Fakaofo's in 2011).

Pure: no clock, no system zone, no I/O.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt

from recoup.timekeeping.zones import resolve_local

I64 = npt.NDArray[np.int64]

DAY = 86_400  # seconds
_EPOCH = datetime(1970, 1, 1)


def offset_at(tz: ZoneInfo, t: int) -> int:
    """Seconds east of UTC in `tz` at the Unix time `t` (seconds)."""
    off = datetime.fromtimestamp(t, tz).utcoffset()
    assert off is not None  # a ZoneInfo always answers
    return int(off.total_seconds())


class ZoneOffsets:
    """UTC offsets of the zone `tz`, for many instants and many local wall times at once.

    `window_start` and `span` (seconds) describe where the wall times given to `walls_to_utc`
    usually fall: from `window_start` after local midnight to `span` seconds later. They only
    decide what is fast; any wall time gives the right answer. Results are cached per day, so
    reuse one instance per zone (and window) across calls."""

    def __init__(self, tz: ZoneInfo, window_start: int = 0, span: int = 0) -> None:
        self.tz = tz
        self.window_start = window_start
        self.span = span
        self._days: dict[int, tuple[int, int, int]] = {}
        self._walls: dict[int, int | None] = {}

    def _utc_day(self, day: int) -> tuple[int, int, int]:
        """(offset before, offset after, first second of 'after') for a UTC day; one DST
        transition per day at most."""
        found = self._days.get(day)
        if found is None:
            lo, hi = day * DAY, (day + 1) * DAY
            before, after = offset_at(self.tz, lo), offset_at(self.tz, hi)
            if before == after:
                found = (before, after, hi + 1)
            else:
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (mid, hi) if offset_at(self.tz, mid) == before else (lo, mid)
                found = (before, after, hi)
            self._days[day] = found
        return found

    def at(self, t: I64) -> I64:
        """Offsets (seconds east of UTC) at the Unix times `t` (seconds)."""
        days, inverse = np.unique(t // DAY, return_inverse=True)
        table = np.array([self._utc_day(int(d)) for d in days], dtype=np.int64).reshape(-1, 3)
        before, after, switch = table[inverse, 0], table[inverse, 1], table[inverse, 2]
        result: I64 = np.where(t < switch, before, after)
        return result

    def _window(self, day: int) -> int | None:
        """The offset of every wall time in the window on local day `day`, or None when the
        window meets an offset change (then each wall time is resolved on its own)."""
        if day not in self._walls:
            offsets = []
            for wall in (self.window_start, self.window_start + self.span):
                local = _EPOCH + timedelta(seconds=day * DAY + wall)
                instant = resolve_local(local, self.tz)
                # The offset the resolution applied, and the one in force at its instant:
                # they differ when the wall time is in a gap.
                offsets.append(int((local - instant.replace(tzinfo=None)).total_seconds()))
                offsets.append(offset_at(self.tz, int(instant.timestamp())))
            self._walls[day] = offsets[0] if len(set(offsets)) == 1 else None
        return self._walls[day]

    def walls_to_utc(self, days: I64, seconds: I64) -> tuple[I64, I64]:
        """UTC instants and the offsets in force there, of the wall times
        `days * 86_400 + window_start + seconds` (local day numbers and seconds into the
        window; arrays of one length)."""
        uniq, inverse = np.unique(days, return_inverse=True)
        window = [self._window(int(d)) for d in uniq]
        known = np.array([w is not None for w in window], dtype=bool)[inverse]
        if seconds.size and (seconds.min() < 0 or seconds.max() > self.span):
            known &= (seconds >= 0) & (seconds <= self.span)
        fixed = np.array([0 if w is None else w for w in window], dtype=np.int64)[inverse]
        wall = days * DAY + self.window_start + seconds
        at = wall - fixed
        offset = fixed.copy()
        for i in np.flatnonzero(~known).tolist():
            local = _EPOCH + timedelta(seconds=int(wall[i]))
            instant = resolve_local(local, self.tz)
            at[i] = int(instant.timestamp())
            offset[i] = offset_at(self.tz, int(at[i]))
        return at, offset


__all__ = ["DAY", "ZoneOffsets", "offset_at"]
