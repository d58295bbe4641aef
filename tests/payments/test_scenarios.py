"""Card scenarios: when a decline clears, and what status it carries."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import InvalidInput, UnknownTimeZone
from recoup.payments import ChargeStatus, Combine, Scenario, SimulatedGateway
from recoup.timekeeping.clock import VirtualClock
from tests.payments.conftest import START, MakeRequest

FIRST = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)
TERMINAL = ChargeStatus.FAILED_TERMINAL


def at(day: int, hour: int = 12, month: int = 12) -> datetime:
    """An instant in December 2026, or in `month` of 2027."""
    return datetime(2026 if month == 12 else 2027, month, day, hour, tzinfo=UTC)


@pytest.mark.parametrize(
    ("scenario", "status"),
    [
        (Scenario.soft("insufficient_funds"), ChargeStatus.FAILED_RETRYABLE),
        (Scenario.hard("stolen_card"), ChargeStatus.FAILED_TERMINAL),
        (Scenario.hard("lost_card"), ChargeStatus.FAILED_TERMINAL),
        # A soft code made hard by the network's advice.
        (Scenario.hard("do_not_honor", advice_code="do_not_try_again"), TERMINAL),
        # Needs the customer, then one prompt retry: retryable, the code says "wait".
        (Scenario.expired(), ChargeStatus.FAILED_RETRYABLE),
        # Card-present only: nothing an off-session retry can fix.
        (Scenario.hard("incorrect_pin"), ChargeStatus.FAILED_TERMINAL),
    ],
)
def test_the_status_follows_the_decline_taxonomy(scenario: Scenario, status: ChargeStatus) -> None:
    assert scenario.status is status


def test_a_soft_decline_clears_after_its_duration_from_the_first_try() -> None:
    scenario = Scenario.soft(clears_after=timedelta(days=3))
    first = FIRST
    assert scenario.declines_at(first, first_try=first, updated_at=None)
    almost = first + timedelta(days=3) - timedelta(microseconds=1)
    assert scenario.declines_at(almost, first_try=first, updated_at=None)
    assert not scenario.declines_at(first + timedelta(days=3), first_try=first, updated_at=None)


def test_a_hard_decline_never_clears_not_even_after_an_update() -> None:
    scenario = Scenario.hard("stolen_card")
    later = FIRST + timedelta(days=3650)
    assert scenario.declines_at(later, first_try=FIRST, updated_at=FIRST)


def test_an_expired_card_clears_only_from_its_update() -> None:
    scenario = Scenario.expired()
    assert scenario.declines_at(at(20), first_try=FIRST, updated_at=None)
    updated = at(10)
    assert scenario.declines_at(at(10) - timedelta(seconds=1), first_try=FIRST, updated_at=updated)
    assert not scenario.declines_at(at(10), first_try=FIRST, updated_at=updated)


@pytest.mark.parametrize(
    ("instant", "declines"),
    [
        (at(14, 23), True),  # the day before the 15th
        (at(15, 0), False),  # payday
        (at(18, 23), False),  # the third day after it: still inside the window
        (at(19, 0), True),  # the fourth: the money is gone
        (at(1, 0, month=1), False),  # the 1st of the next month
    ],
)
def test_a_payday_decline_clears_on_paydays_and_the_window_after(
    instant: datetime, declines: bool
) -> None:
    scenario = Scenario.soft(paydays=(1, 15), window_days=3)
    assert scenario.declines_at(instant, first_try=FIRST, updated_at=None) is declines


def test_paydays_are_local_dates_in_the_scenarios_zone() -> None:
    # 2026-12-15 03:00 UTC is still the 14th in New York (UTC−5).
    scenario = Scenario.soft(paydays=(15,), window_days=0, timezone="America/New_York")
    assert scenario.declines_at(at(15, 3), first_try=FIRST, updated_at=None)
    assert not scenario.declines_at(at(15, 5), first_try=FIRST, updated_at=None)


def test_a_payday_past_the_months_end_falls_on_its_last_day() -> None:
    scenario = Scenario.soft(paydays=(31,), window_days=0)
    feb_28 = datetime(2027, 2, 28, 12, tzinfo=UTC)
    assert not scenario.declines_at(feb_28, first_try=FIRST, updated_at=None)
    assert scenario.declines_at(feb_28 - timedelta(days=1), first_try=FIRST, updated_at=None)


def test_given_payday_dates_clear_like_paydays() -> None:
    scenario = Scenario.soft(payday_dates=(date(2026, 12, 24),), window_days=1)
    assert scenario.declines_at(at(23), first_try=FIRST, updated_at=None)
    assert not scenario.declines_at(at(25), first_try=FIRST, updated_at=None)
    assert scenario.declines_at(at(26), first_try=FIRST, updated_at=None)


def test_all_means_after_the_duration_and_inside_a_payday_window() -> None:
    scenario = Scenario.soft(
        clears_after=timedelta(days=10), paydays=(15,), window_days=0, combine=Combine.ALL
    )
    assert scenario.declines_at(at(15), first_try=FIRST, updated_at=None)  # 7 days in: too soon
    assert scenario.declines_at(at(20), first_try=FIRST, updated_at=None)  # not a payday
    assert not scenario.declines_at(at(15, month=1), first_try=FIRST, updated_at=None)


def test_any_means_either_condition_clears_it() -> None:
    scenario = Scenario.soft(clears_after=timedelta(days=10), paydays=(15,), window_days=0)
    assert not scenario.declines_at(at(15), first_try=FIRST, updated_at=None)
    assert not scenario.declines_at(at(20), first_try=FIRST, updated_at=None)
    assert scenario.declines_at(at(16), first_try=FIRST, updated_at=None)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"decline_code": ""}, "decline_code"),
        ({"decline_code": "x", "clears_after": timedelta(0)}, "clears_after"),
        ({"decline_code": "x", "paydays": (0,)}, "paydays"),
        ({"decline_code": "x", "paydays": (32,)}, "paydays"),
        ({"decline_code": "x", "window_days": -1}, "window_days"),
        ({"decline_code": "x", "window_days": 28}, "window_days"),
        ({"decline_code": "x", "probability": 0.0}, "probability"),
        ({"decline_code": "x", "probability": float("nan")}, "probability"),
        ({"decline_code": "x", "payday_dates": (START,)}, "payday_dates"),
    ],
)
def test_a_scenario_refuses_bad_fields_by_name(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Scenario(**fields)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_a_scenario_refuses_an_unknown_zone() -> None:
    with pytest.raises(UnknownTimeZone):
        Scenario.soft(paydays=(1,), timezone="Mars/Olympus")


def test_probable_declines_are_drawn_from_the_seed_and_the_key(request_for: MakeRequest) -> None:
    def outcomes(seed: int) -> list[ChargeStatus]:
        gateway = SimulatedGateway(VirtualClock(START), seed=seed)
        gateway.add_card("card_flaky", Scenario.soft("processing_error", probability=0.5))
        return [
            gateway.charge(request_for(f"k{i}", invoice_id=f"inv_{i}", card="card_flaky")).status
            for i in range(64)
        ]

    first = outcomes(seed=3)
    assert first == outcomes(seed=3)  # the same seed, the same run
    assert first != outcomes(seed=4)
    assert 10 < first.count(ChargeStatus.SUCCEEDED) < 54  # about half, not all or nothing


# An independent statement of the payday window: some payday d (clamped to the month's last
# day) of this month or the month before with 0 ≤ local date − d ≤ window.
def _paydays_near(day: date, paydays: tuple[int, ...]) -> list[date]:
    months = [(day.year, day.month)]
    previous = day.replace(day=1) - timedelta(days=1)
    months.append((previous.year, previous.month))
    return [date(y, m, min(p, calendar.monthrange(y, m)[1])) for (y, m) in months for p in paydays]


@given(
    instant=st.datetimes(
        min_value=datetime(2025, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
    ),
    paydays=st.lists(st.integers(1, 31), min_size=1, max_size=4, unique=True).map(tuple),
    window=st.integers(0, 27),
    tz=st.sampled_from(["UTC", "America/New_York", "Asia/Kolkata", "Pacific/Kiritimati"]),
)
def test_the_payday_window_matches_an_independent_calculation(
    instant: datetime, paydays: tuple[int, ...], window: int, tz: str
) -> None:
    scenario = Scenario.soft(paydays=paydays, window_days=window, timezone=tz)
    local = instant.astimezone(ZoneInfo(tz)).date()
    expected = any(0 <= (local - d).days <= window for d in _paydays_near(local, paydays))
    assert scenario.in_payday_window(instant) is expected
    assert scenario.declines_at(instant, first_try=instant, updated_at=None) is not expected


@given(
    first=st.datetimes(
        min_value=datetime(2025, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
    ),
    after=st.timedeltas(min_value=timedelta(seconds=1), max_value=timedelta(days=60)),
    offset=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=90)),
)
def test_a_timed_decline_clears_exactly_when_its_duration_has_passed(
    first: datetime, after: timedelta, offset: timedelta
) -> None:
    scenario = Scenario.soft(clears_after=after)
    assert scenario.declines_at(first + offset, first_try=first, updated_at=None) is (
        offset < after
    )
