import asyncio
import threading
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


def test_a_pinned_virtual_clock_reads_the_pin_only_in_its_own_context() -> None:
    # A test clock runs each job at its own instant while the clock has moved on: the pin
    # holds in the block, in tasks it creates and in threads it starts with to_thread, and
    # nowhere else.
    clock = VirtualClock(datetime(2026, 1, 2, tzinfo=UTC))
    earlier = datetime(2026, 1, 1, 9, 30, tzinfo=UTC)
    seen: dict[str, datetime] = {}

    async def outside() -> None:
        seen["other task"] = clock.now()

    async def main() -> None:
        with clock.pinned(earlier):
            seen["block"] = clock.now()
            seen["thread"] = await asyncio.to_thread(clock.now)
            child = asyncio.get_running_loop().create_task(asyncio.to_thread(clock.now))
            with clock.pinned(earlier + timedelta(hours=1)):
                seen["nested"] = clock.now()
            seen["after nested"] = clock.now()
        other = asyncio.get_running_loop().create_task(outside())
        seen["child task"] = await child
        await other
        seen["after"] = clock.now()

    asyncio.run(main())
    assert seen == {
        "block": earlier,
        "thread": earlier,
        "child task": earlier,
        "nested": earlier + timedelta(hours=1),
        "after nested": earlier,
        "other task": datetime(2026, 1, 2, tzinfo=UTC),
        "after": datetime(2026, 1, 2, tzinfo=UTC),
    }
    clock.set(datetime(2026, 1, 3, tzinfo=UTC))  # a pin never held the clock itself back
    with clock.pinned(earlier):
        assert threading_now(clock) == datetime(2026, 1, 3, tzinfo=UTC)


def threading_now(clock: VirtualClock) -> datetime:
    """The clock's now as a plain thread (which copies no context) reads it."""
    result: list[datetime] = []
    thread = threading.Thread(target=lambda: result.append(clock.now()))
    thread.start()
    thread.join()
    return result[0]
