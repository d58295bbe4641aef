from datetime import UTC, datetime, timedelta, timezone

import pytest

from recoup.errors import InvalidInput
from recoup.timekeeping.clock import Clock, SystemClock, VirtualClock


def test_a_virtual_clock_stands_still_until_moved() -> None:
    # Given in +02:00, read back in UTC; advance and set move it forward.
    clock = VirtualClock(datetime(2026, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2))))
    assert clock.now() == datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    assert clock.now().tzinfo is UTC
    assert clock.advance(timedelta(minutes=5)) == datetime(2026, 1, 1, 10, 5, tzinfo=UTC)
    clock.set(datetime(2026, 1, 2, tzinfo=UTC))
    assert clock.now() == datetime(2026, 1, 2, tzinfo=UTC)


def test_a_virtual_clock_never_goes_back() -> None:
    # Replays and the worker rely on time being monotonic.
    clock = VirtualClock(datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="never goes back"):
        clock.set(datetime(2025, 12, 31, tzinfo=UTC))
    with pytest.raises(ValueError, match="never goes back"):
        clock.advance(timedelta(seconds=-1))


def test_a_virtual_clock_refuses_a_naive_start() -> None:
    with pytest.raises(InvalidInput, match="start"):
        VirtualClock(datetime(2026, 1, 1))


def test_the_system_clock_reads_an_aware_utc_instant() -> None:
    # Both clocks satisfy the protocol; the system one answers in UTC.
    clocks: list[Clock] = [SystemClock(), VirtualClock(datetime(2026, 1, 1, tzinfo=UTC))]
    for clock in clocks:
        assert clock.now().utcoffset() == timedelta(0)
