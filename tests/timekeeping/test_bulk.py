"""Bulk wall-clock conversion equals zoneinfo element by element, DST transitions included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.timekeeping.bulk import DAY, ZoneOffsets, offset_at
from recoup.timekeeping.zones import resolve_local, zone
from tests.timekeeping.strategies import ALL_ZONES, TRANSITIONS

EPOCH = datetime(1970, 1, 1)
FIRST = int(datetime(2015, 1, 1, tzinfo=UTC).timestamp())  # after the last skipped whole days
LAST = int(datetime(2060, 12, 31, tzinfo=UTC).timestamp())


def _expected_offset(tz_name: str, t: int) -> int:
    off = datetime.fromtimestamp(t, zone(tz_name)).utcoffset()
    assert off is not None
    return int(off.total_seconds())


def _near_transition_instants(tz_name: str, moment: datetime, draw: st.DrawFn) -> list[int]:
    at = int(resolve_local(moment, tz_name).timestamp())
    return [at + draw(st.integers(-6 * 3600, 6 * 3600)) for _ in range(draw(st.integers(1, 30)))]


@st.composite
def zone_and_instants(draw: st.DrawFn) -> tuple[str, list[int]]:
    """A zone and Unix times in it: around one of its DST transitions half of the time (seconds
    either side of the change included), else anywhere from 2015 to 2060."""
    if draw(st.booleans()):
        tz_name, moment = draw(st.sampled_from(TRANSITIONS))
        instants = _near_transition_instants(tz_name, moment, draw)
        at = int(resolve_local(moment, tz_name).timestamp())
        instants += [at - 1, at, at + 1]
        return tz_name, instants
    tz_name = draw(st.sampled_from(ALL_ZONES))
    return tz_name, draw(st.lists(st.integers(FIRST, LAST), min_size=1, max_size=30))


@given(zone_and_instants())
@settings(max_examples=300, deadline=None)
def test_offsets_at_instants_equal_zoneinfo_per_element(case: tuple[str, list[int]]) -> None:
    tz_name, instants = case
    got = ZoneOffsets(zone(tz_name)).at(np.array(instants, dtype=np.int64))
    assert got.tolist() == [_expected_offset(tz_name, t) for t in instants]


@st.composite
def zone_window_and_walls(draw: st.DrawFn) -> tuple[str, int, int, list[int], list[int]]:
    """A zone, a window (start and span, seconds after local midnight) and wall times given as
    (local day, seconds into the window): on a transition day half of the time, with windows
    that cover the gap or fold and seconds that may fall outside the window."""
    start = draw(st.integers(0, DAY - 1))
    span = draw(st.integers(0, 6 * 3600))
    if draw(st.booleans()):
        tz_name, moment = draw(st.sampled_from(TRANSITIONS))
        day = (moment - EPOCH).days
        # Often put the window right over the change, so it starts before and ends after.
        if draw(st.booleans()):
            start = max(0, moment.hour * 3600 + moment.minute * 60 - draw(st.integers(0, 3600)))
        days = [day + draw(st.integers(-1, 1)) for _ in range(draw(st.integers(1, 20)))]
    else:
        tz_name = draw(st.sampled_from(ALL_ZONES))
        first, last = FIRST // DAY, LAST // DAY
        days = draw(st.lists(st.integers(first, last), min_size=1, max_size=20))
    seconds = [draw(st.integers(-600, span + 600)) for _ in days]
    return tz_name, start, span, days, seconds


@given(zone_window_and_walls())
@settings(max_examples=300, deadline=None)
def test_wall_times_resolve_as_resolve_local_per_element(
    case: tuple[str, int, int, list[int], list[int]],
) -> None:
    tz_name, start, span, days, seconds = case
    offsets = ZoneOffsets(zone(tz_name), start, span)
    at, off = offsets.walls_to_utc(
        np.array(days, dtype=np.int64), np.array(seconds, dtype=np.int64)
    )
    for i, (day, second) in enumerate(zip(days, seconds, strict=True)):
        local = EPOCH + timedelta(seconds=day * DAY + start + second)
        instant = resolve_local(local, tz_name)
        assert at[i] == int(instant.timestamp()), (local, tz_name)
        assert off[i] == _expected_offset(tz_name, int(instant.timestamp())), (local, tz_name)


def test_a_gap_wall_time_moves_forward_and_a_fold_wall_time_is_the_earlier_instant() -> None:
    # DST begins in New York on 2026-03-08 at 02:00 (clocks jump to 03:00); it ends on
    # 2026-11-01 at 02:00 (clocks go back to 01:00).
    new_york = ZoneOffsets(zone("America/New_York"), 2 * 3600, 3600)
    spring = (datetime(2026, 3, 8) - EPOCH).days
    fall = (datetime(2026, 11, 1) - EPOCH).days
    at, off = new_york.walls_to_utc(
        np.array([spring, fall], dtype=np.int64), np.array([30 * 60, -30 * 60])
    )
    # 02:30 does not exist: 03:30 EDT (07:30 UTC). 01:30 happens twice: the EDT one first.
    assert datetime.fromtimestamp(int(at[0]), UTC) == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)
    assert off[0] == -4 * 3600
    assert datetime.fromtimestamp(int(at[1]), UTC) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    assert off[1] == -4 * 3600


def test_offset_at_reads_one_instant() -> None:
    # Lord Howe keeps a 30-minute DST: +10:30 in winter, +11:00 in summer.
    lord_howe = zone("Australia/Lord_Howe")
    winter = int(datetime(2026, 7, 1, tzinfo=UTC).timestamp())
    summer = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    assert offset_at(lord_howe, winter) == 10 * 3600 + 1800
    assert offset_at(lord_howe, summer) == 11 * 3600
