from datetime import UTC, datetime

import pytest

from recoup.errors import UnknownTimeZone
from recoup.timekeeping import is_ambiguous, is_in_gap, resolve_local, zone


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
