"""Properties of the planner over random failures: monotone, bounded, on business days inside
the window, deterministic, and silent on hard declines."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.dunning import (
    AwaitCustomer,
    NoRetry,
    Retry,
    decision_as_dict,
    plan_retries,
    preset,
)
from recoup.dunning.landing import customer_calendar
from recoup.dunning.taxonomy import classify

from .strategies import ACTION_CODES, HARD_CODES, failures

POLICIES = st.sampled_from(["business-days", "calendar"]).map(preset)


@given(failures(), POLICIES)
def test_attempts_are_strictly_increasing_and_after_the_failure(failure, policy) -> None:
    decision = plan_retries(failure, policy)
    if isinstance(decision, Retry):
        instants = [failure.failed_at] + [a.at for a in decision.attempts]
        assert all(a < b for a, b in itertools.pairwise(instants))
        assert [a.attempt for a in decision.attempts] == list(range(1, len(decision.attempts) + 1))


@given(failures(), POLICIES)
def test_every_attempt_is_on_a_business_day_inside_the_local_window(failure, policy) -> None:
    decision = plan_retries(failure, policy)
    calendar = customer_calendar(policy, failure.country)
    opens = datetime.combine(datetime.min, policy.window_start)
    closes = opens + timedelta(minutes=policy.jitter_minutes)
    for attempt in decision.attempts if isinstance(decision, Retry) else ():
        local = attempt.local
        assert str(local.tzinfo) == failure.timezone
        assert calendar.is_business_day(local.date()), local
        assert opens.time() <= local.time() <= closes.time(), local


@given(failures(), POLICIES)
def test_never_more_than_the_policy_allows(failure, policy) -> None:
    decision = plan_retries(failure, policy)
    if isinstance(decision, Retry):
        cap = classify(failure.decline_code, failure.advice_codes).max_attempts
        assert len(decision.attempts) <= min(len(policy.gaps), cap or len(policy.gaps))
        last = decision.attempts[-1].at
        assert last - failure.failed_at <= timedelta(days=policy.max_duration_days)


@given(failures(codes=HARD_CODES), POLICIES)
def test_hard_declines_are_never_planned(failure, policy) -> None:
    decision = plan_retries(failure, policy)
    assert isinstance(decision, NoRetry)
    assert decision_as_dict(decision)["attempts"] == []


@given(failures(codes=ACTION_CODES), POLICIES)
def test_declines_that_need_the_customer_wait_for_the_customer(failure, policy) -> None:
    # No advice code drawn here is stricter than customer_action, so none overrides.
    assert isinstance(plan_retries(failure, policy), AwaitCustomer)


@settings(max_examples=25)
@given(failures(), POLICIES)
def test_a_re_plan_gives_identical_output(failure, policy) -> None:
    first = decision_as_dict(plan_retries(failure, policy))
    again = decision_as_dict(plan_retries(failure, preset(policy.name)))
    assert first == again
