from datetime import UTC, datetime

import pytest
from hypothesis import given

from recoup.errors import InvalidInput, UnknownTimeZone
from recoup.timekeeping import (
    is_ambiguous,
    is_in_gap,
    resolve_local,
    start_of_local_day,
    to_local,
    zone,
)
from tests.timekeeping.strategies import expected_instant, instants_reading, wall_times


def test_a_time_in_the_spring_forward_gap_moves_forward_by_the_gap() -> None:
    # 2026-03-08 02:00 EST → 03:00 EDT in New York: 02:30 does not exist, 03:30 EDT does.
    at = resolve_local(datetime(2026, 3, 8, 2, 30), "America/New_York")
    assert at == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)
    assert is_in_gap(datetime(2026, 3, 8, 2, 30), "America/New_York")


def test_a_time_in_the_fall_back_fold_is_the_earlier_instant() -> None:
    # 2026-11-01 01:30 happens twice in New York: EDT (05:30Z) first, EST (06:30Z) second.
    at = resolve_local(datetime(2026, 11, 1, 1, 30), "America/New_York")
    assert at == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    assert is_ambiguous(datetime(2026, 11, 1, 1, 30), "America/New_York")


def test_an_unknown_zone_is_an_error_that_names_it() -> None:
    with pytest.raises(UnknownTimeZone, match="Mars/Olympus_Mons"):
        zone("Mars/Olympus_Mons")


@given(wall_times())
def test_resolving_and_converting_back_gives_the_same_wall_time_except_in_a_gap(
    case: tuple[datetime, str],
) -> None:
    # Checked against a brute-force search over the zone's offsets: a wall time that some
    # instant reads comes back unchanged (at its earliest instant); one no instant reads is in
    # a gap and comes back later, moved forward by the gap.
    local, tz = case
    at = resolve_local(local, tz)
    back = to_local(at, tz).replace(tzinfo=None)
    assert at == expected_instant(local, tz)
    if instants_reading(local, tz):
        assert back == local
        assert not is_in_gap(local, tz)
    else:
        assert back > local
        assert is_in_gap(local, tz)


def test_midnight_does_not_exist_in_havana_on_its_dst_day() -> None:
    # Havana springs 00:00 → 01:00 on 2026-03-08: the day starts at 01:00 CDT (05:00Z).
    assert start_of_local_day(datetime(2026, 3, 8), "America/Havana") == datetime(
        2026, 3, 8, 5, 0, tzinfo=UTC
    )


def test_kathmandu_is_five_hours_forty_five_ahead() -> None:
    # No DST, quarter-hour offset: 09:00 is 03:15Z.
    assert resolve_local(datetime(2026, 6, 1, 9, 0), "Asia/Kathmandu") == datetime(
        2026, 6, 1, 3, 15, tzinfo=UTC
    )


def test_lord_howe_gap_is_thirty_minutes() -> None:
    # 2026-10-04 02:00 → 02:30: 02:10 is missing and becomes 02:40 +11:00.
    at = resolve_local(datetime(2026, 10, 4, 2, 10), "Australia/Lord_Howe")
    assert to_local(at, "Australia/Lord_Howe").isoformat() == "2026-10-04T02:40:00+11:00"


def test_to_local_refuses_a_naive_instant() -> None:
    # astimezone would read a naive value in the machine's zone: an impure, machine-dependent
    # answer.
    with pytest.raises(InvalidInput, match="instant"):
        to_local(datetime(2026, 1, 1, 12, 0), "Europe/Paris")


def test_resolve_local_refuses_an_aware_time() -> None:
    # An aware value already names its instant; resolving it again would hide a bug.
    with pytest.raises(InvalidInput, match="local"):
        resolve_local(datetime(2026, 1, 1, 12, 0, tzinfo=UTC), "Europe/Paris")


@pytest.mark.parametrize("name", ["", " Europe/Paris", "../etc/passwd", "Europe/Atlantis"])
def test_it_refuses_malformed_and_unknown_zone_names(name: str) -> None:
    # Blank, padded, path-like and unknown names are all the same clear error.
    with pytest.raises(UnknownTimeZone) as caught:
        zone(name, field="tz")
    assert caught.value.field == "tz"
