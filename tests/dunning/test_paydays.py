"""Payday-aware timing: the `paydays` field, the dates it names, and the planner moving
insufficient-funds retries onto them without breaking any other rule of the policy."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.dunning import Failure, Retry, parse_policy, plan_retries, preset
from recoup.dunning.landing import customer_calendar
from recoup.dunning.limits import CardAttempt
from recoup.dunning.policy import Blackout
from recoup.dunning.policy_paydays import (
    Paydays,
    country_paydays,
    is_insufficient_funds,
    is_payday,
    parse_paydays,
    paydays_of_month,
)
from recoup.errors import ConfigError
from recoup.timekeeping.calendar import BusinessCalendar
from recoup.timekeeping.zones import resolve_local, zone

from .strategies import failures

BASE = preset("business-days")
US = BusinessCalendar(country="US")


def _with_paydays(value: object, base: str = "business-days") -> object:
    return dataclasses.replace(preset(base), paydays=parse_paydays(value))


def test_a_policy_reads_paydays_as_days_and_the_last_business_day() -> None:
    policy = parse_policy('gaps = [{ days = 1 }]\npaydays = [1, 15, "last_business_day"]\n')
    assert policy.paydays == Paydays(rules=(1, 15, "last_business_day"))


def test_a_policy_reads_paydays_by_country() -> None:
    policy = parse_policy('gaps = [{ days = 1 }]\npaydays = "country"\n')
    assert policy.paydays == Paydays(by_country=True)
    assert policy.paydays.rules_for("us") == (1, 15)


def test_a_policy_without_paydays_has_none() -> None:
    assert BASE.paydays is None


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ([0], "paydays[0]"),  # no day 0
        ([32], "paydays[0]"),  # nor 32
        ([1, "payday"], "paydays[1]"),  # an unknown word
        ([True], "paydays[0]"),  # a boolean is not a day
        ([], "paydays"),  # nothing to aim at
        ("monthly", "paydays"),  # not the one word allowed
    ],
)
def test_bad_paydays_are_refused_naming_the_value(value: object, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_paydays(value)
    assert caught.value.field == field


def test_the_country_conventions_follow_the_published_ones() -> None:
    assert country_paydays("US") == (1, 15)
    assert country_paydays("GB") == ("last_business_day",)
    assert country_paydays("DE") == ("last_business_day",)
    assert country_paydays("JP") == (25,)
    assert country_paydays("FR") == ()  # no convention in the data: nothing to aim at
    assert country_paydays(None) == ()


def test_a_payday_on_a_weekend_is_paid_on_the_friday_before() -> None:
    # 15 November 2026 is a Sunday.
    assert paydays_of_month((15,), 2026, 11, US) == {date(2026, 11, 13)}


def test_the_first_on_a_sunday_is_paid_in_the_month_before() -> None:
    # 1 November 2026 is a Sunday: paid on Friday 30 October.
    assert is_payday(date(2026, 10, 30), (1,), US)
    assert not is_payday(date(2026, 11, 1), (1,), US)


def test_the_last_business_day_skips_weekend_and_holidays() -> None:
    gb = BusinessCalendar(country="GB")
    # 31 October 2026 is a Saturday; 31 December 2026 a Thursday (no holiday).
    assert paydays_of_month(("last_business_day",), 2026, 10, gb) == {date(2026, 10, 30)}
    assert paydays_of_month(("last_business_day",), 2026, 12, gb) == {date(2026, 12, 31)}


def test_a_day_past_the_months_end_is_its_last_day() -> None:
    # 30 April 2026 is a Thursday.
    assert paydays_of_month((31,), 2026, 4, US) == {date(2026, 4, 30)}


def test_only_insufficient_funds_follows_paydays() -> None:
    assert is_insufficient_funds("insufficient_funds")
    assert is_insufficient_funds("51")
    assert not is_insufficient_funds("do_not_honor")
    assert not is_insufficient_funds(None)


def _nsf(at: datetime, **extra: object) -> Failure:
    fields: dict[str, object] = {
        "invoice": "inv_1",
        "failed_at": at,
        "timezone": "America/New_York",
        "country": "US",
        "decline_code": "insufficient_funds",
    }
    return Failure(**{**fields, **extra})  # type: ignore[arg-type]


def test_an_insufficient_funds_retry_moves_to_the_next_payday() -> None:
    # Tuesday 6 October 2026, 15:00 New York: the gap says Wednesday the 7th; the next US
    # payday is Thursday the 15th.
    policy = _with_paydays("country")
    decision = plan_retries(_nsf(datetime(2026, 10, 6, 19, tzinfo=UTC)), policy)
    assert isinstance(decision, Retry)
    assert decision.attempts[0].local.date() == date(2026, 10, 15)
    assert "moved to the payday 2026-10-15" in decision.reason


def test_other_declines_keep_the_gaps() -> None:
    at = datetime(2026, 10, 6, 19, tzinfo=UTC)
    plain = plan_retries(_nsf(at, decline_code="do_not_honor"), BASE)
    aimed = plan_retries(_nsf(at, decline_code="do_not_honor"), _with_paydays("country"))
    assert plain == aimed


def test_a_country_without_a_convention_keeps_the_gaps() -> None:
    at = datetime(2026, 10, 6, 19, tzinfo=UTC)
    french = {"timezone": "Europe/Paris", "country": "FR"}
    assert plan_retries(_nsf(at, **french), BASE) == plan_retries(
        _nsf(at, **french), _with_paydays("country")
    )


def test_no_payday_before_the_maximum_duration_keeps_the_gaps() -> None:
    # Paydays on the 28th only, a failure on the 1st, and 5 days at most: none is reachable.
    policy = dataclasses.replace(
        BASE, paydays=Paydays(rules=(28,)), max_duration_days=5, name="short"
    )
    at = datetime(2026, 10, 1, 15, tzinfo=UTC)
    plain = plan_retries(_nsf(at), dataclasses.replace(BASE, max_duration_days=5, name="short"))
    assert plan_retries(_nsf(at), policy) == plain


def test_a_blackout_on_the_payday_takes_the_next_payday() -> None:
    policy = dataclasses.replace(
        BASE,
        paydays=Paydays(rules=(8, 15)),
        blackouts=(
            Blackout(
                gateway="stripe",
                start=datetime(2026, 10, 8, tzinfo=UTC),
                end=datetime(2026, 10, 9, tzinfo=UTC),
            ),
        ),
    )
    decision = plan_retries(_nsf(datetime(2026, 10, 6, 19, tzinfo=UTC), gateway="stripe"), policy)
    assert isinstance(decision, Retry)
    assert decision.attempts[0].local.date() == date(2026, 10, 15)


# Properties: a payday-moved plan obeys every rule the plain one does.

PAYDAY_POLICIES = st.builds(
    lambda base, rules, min_gap, days: dataclasses.replace(
        preset(base),
        paydays=Paydays(rules=tuple(rules)) if rules else Paydays(by_country=True),
        min_gap_hours=min_gap,
        max_duration_days=days,
    ),
    st.sampled_from(["business-days", "calendar"]),
    st.lists(st.sampled_from([1, 5, 10, 15, 20, 25, 28, 31, "last_business_day"]), max_size=3),
    st.sampled_from([0.0, 24.0, 72.0]),
    st.integers(3, 45),
)
NSF = failures(codes=["insufficient_funds", "51"])


def _renewal(failure: Failure, days: int | None) -> Failure:
    if days is None:
        return failure
    return dataclasses.replace(failure, next_renewal_at=failure.failed_at + timedelta(days=days))


@settings(max_examples=150, deadline=None)
@given(NSF, PAYDAY_POLICIES, st.one_of(st.none(), st.integers(2, 40)))
def test_payday_plans_obey_window_days_duration_renewal_and_gaps(failure, policy, renewal):
    failure = _renewal(failure, renewal)
    decision = plan_retries(failure, policy)
    if not isinstance(decision, Retry):
        return
    calendar = customer_calendar(policy, failure.country)
    opens = datetime.combine(datetime.min, policy.window_start)
    closes = opens + timedelta(minutes=policy.jitter_minutes)
    min_gap = timedelta(hours=policy.min_gap_hours)
    instants = [failure.failed_at, *(a.at for a in decision.attempts)]
    for before, after in itertools.pairwise(instants):
        assert after - before >= min_gap
        assert after > before
    assert len(decision.attempts) <= len(policy.gaps)
    for attempt in decision.attempts:
        assert calendar.is_business_day(attempt.local.date())
        assert opens.time() <= attempt.local.time() <= closes.time()
        assert attempt.at - failure.failed_at <= timedelta(days=policy.max_duration_days)
        if failure.next_renewal_at is not None:
            assert attempt.at < failure.next_renewal_at


@settings(max_examples=150, deadline=None)
@given(NSF, PAYDAY_POLICIES)
def test_a_payday_attempt_lands_on_the_first_reachable_payday(failure, policy):
    """Attempt 1 lands on the first payday on or after the plain plan's day (a business day
    whose window instant is within the maximum duration); with none, the plain plan stands."""
    decision = plan_retries(failure, policy)
    plain = plan_retries(failure, dataclasses.replace(policy, paydays=None))
    calendar = customer_calendar(policy, failure.country)
    rules = policy.paydays.rules_for(failure.country)
    if not isinstance(plain, Retry):
        return
    first = plain.attempts[0].local  # no blackout or card limit here: min gap moves it at most
    deadline = failure.failed_at + timedelta(days=policy.max_duration_days)
    tz = zone(failure.timezone)
    reachable = [
        day
        for day in (first.date() + timedelta(days=n) for n in range(policy.max_duration_days + 1))
        if is_payday(day, rules, calendar)
        and calendar.is_business_day(day)
        and resolve_local(datetime.combine(day, first.time().replace(tzinfo=None)), tz) <= deadline
    ]
    if not reachable:
        assert decision == plain
        return
    assert isinstance(decision, Retry)
    assert decision.attempts[0].local.date() == reachable[0]


@settings(max_examples=100, deadline=None)
@given(NSF, PAYDAY_POLICIES, st.integers(0, 14))
def test_payday_plans_keep_the_visa_limit_with_a_busy_card(failure, policy, used):
    """A Visa card that already took `used` reattempts gets at most 15 in any 30 days."""
    failure = dataclasses.replace(failure, card="card_1", network="visa")
    history = [
        CardAttempt(card="card_1", at=failure.failed_at - timedelta(hours=i + 1), invoice="other")
        for i in range(used)
    ]
    decision = plan_retries(failure, policy, history=history)
    if isinstance(decision, Retry):
        times = sorted([*(h.at for h in history), *(a.at for a in decision.attempts)])
        for start in times:
            inside = [t for t in times if start <= t < start + timedelta(days=30)]
            assert len(inside) <= policy.networks.visa_max_reattempts_30d
