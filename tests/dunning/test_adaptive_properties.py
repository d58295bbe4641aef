"""Properties of the adaptive planner over random attempt logs, seeds and failures: no plan
breaks a guardrail of its policy, and the same log and seed give the same plan."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.dunning import (
    Blackout,
    CardAttempt,
    Failure,
    NoRetry,
    Retry,
    parse_policy,
    plan_retries,
)
from recoup.dunning.adaptive_counts import LearnerState, learner_state
from recoup.dunning.adaptive_planner import plan_adaptive
from recoup.dunning.adaptive_slots import DOM_CLASSES, AttemptRecord, Context, Slot
from recoup.dunning.landing import customer_calendar
from recoup.dunning.limits import limit_reason
from recoup.dunning.policy import DunningPolicy
from recoup.dunning.taxonomy import classify, default_taxonomy
from recoup.timekeeping.zones import to_local

from .strategies import ACTION_CODES, HARD_CODES, SOFT_CODES, SPAN, START, failures

REGIONS = ["US", "GB", "DE", "IN", "IL", "AU", "NZ", "CA", "BR", "PACIFIC", "UTC"]
NETWORKS = ["visa", "mastercard", ""]
END = (START + SPAN).replace(tzinfo=None)


@st.composite
def records(draw: st.DrawFn) -> AttemptRecord:
    """A logged attempt in a context a drawn failure may have (soft declines)."""
    band = draw(st.integers(0, 23)) * 60
    return AttemptRecord(
        context=Context(
            decline_class="soft",
            decline_code=draw(st.sampled_from(SOFT_CODES)),
            region=draw(st.sampled_from(REGIONS)),
            network=draw(st.sampled_from(NETWORKS)),
            attempt=draw(st.integers(1, 4)),
        ),
        slot=Slot(
            band_start=band,
            band_minutes=60,
            weekday=draw(st.integers(0, 6)),
            dom_class=draw(st.sampled_from(DOM_CLASSES)),
        ),
        success=draw(st.booleans()),
        static=band == 600,
    )


# Learning-heavy logs: a few hundred attempts, some contexts repeated, so slots move.
LOGS = st.lists(records(), max_size=40).map(lambda rows: learner_state(rows * 8))


@st.composite
def adaptive_policies(draw: st.DrawFn) -> DunningPolicy:
    """Adaptive policies with tight guardrails: short durations, minimum gaps, small network
    limits, a blackout on gateway "gw", narrow or wide hours, no cold start."""
    start = draw(st.sampled_from(["06:00", "08:00", "12:00", "17:00"]))
    end = draw(st.sampled_from(["14:00", "20:00", "24:00"]))
    if end <= start:
        end = "24:00"
    gaps = draw(st.sampled_from(["{ business_days = 1 }", "{ days = 2 }", "{ business_days = 3 }"]))
    text = f"""
name = "adaptive-test"
gaps = [{gaps}, {{ business_days = 1 }}, {{ days = 3 }}, {{ business_days = 2 }}]
strategy = "adaptive"
[window]
start = "{draw(st.sampled_from(["07:00", "10:00", "21:00"]))}"
jitter_minutes = {draw(st.integers(0, 90))}
[limits]
min_gap_hours = {draw(st.sampled_from([0, 20, 40]))}
max_duration_days = {draw(st.integers(2, 21))}
[networks]
visa_max_reattempts_30d = {draw(st.integers(1, 4))}
mastercard_max_per_card_per_day = {draw(st.integers(1, 3))}
mastercard_max_per_merchant_amount_30d = {draw(st.integers(2, 6))}
[adaptive]
hours_start = "{start}"
hours_end = "{end}"
band_minutes = {draw(st.sampled_from([30, 60, 120]))}
shift_days = {draw(st.integers(0, 4))}
exploration = {draw(st.sampled_from([0.0, 0.3, 1.0]))}
prior_strength = {draw(st.sampled_from([2, 20]))}
min_attempts = 0
propensity_draws = 10
"""
    policy = parse_policy(text)
    if draw(st.booleans()):
        return policy
    # A blackout somewhere in the drawn failures' years, of up to a few days.
    begin = draw(st.datetimes(min_value=START.replace(tzinfo=None), max_value=END)).replace(
        tzinfo=UTC
    )
    length = timedelta(hours=draw(st.integers(1, 96)))
    return dataclasses.replace(
        policy, blackouts=(Blackout(gateway="gw", start=begin, end=begin + length),)
    )


@st.composite
def card_failures(draw: st.DrawFn, codes: list[str] | None = None) -> tuple[Failure, list]:
    """A failure on a card with a network, a gateway, maybe a renewal, and the card's other
    attempts around it (for network limits)."""
    base = draw(failures(codes=codes))
    network = draw(st.sampled_from(["visa", "mastercard", None]))
    renewal = (
        base.failed_at + timedelta(hours=draw(st.integers(1, 24 * 20)))
        if draw(st.booleans())
        else None
    )
    failure = dataclasses.replace(
        base,
        card="card_1",
        network=network,
        gateway="gw",
        merchant_id="m",
        amount=1000,
        next_renewal_at=renewal,
        # A Visa limit binds only a decline of a limited category: make most Visa ones such.
        decline_code="do_not_honor" if network == "visa" and codes is None else base.decline_code,
    )
    offsets = draw(st.lists(st.integers(-24 * 20, 24 * 20), max_size=6))
    history = [
        CardAttempt(
            card="card_1",
            at=failure.failed_at + timedelta(hours=h),
            invoice="other",
            merchant_id="m",
            amount=1000,
        )
        for h in offsets
    ]
    return failure, history


def assert_within_guardrails(
    failure: Failure, policy: DunningPolicy, history: list, state: LearnerState, seed: int
) -> None:
    static = plan_retries(failure, policy, history=history)
    plan = plan_adaptive(failure, policy, state, seed=seed, history=history).decision
    if not isinstance(static, Retry):
        assert plan == static  # hard declines and customer action: never retried by learning
        return
    if isinstance(plan, NoRetry):  # the static plan had attempts: learning drops none of all
        raise AssertionError(plan)
    assert isinstance(plan, Retry)
    assert len(plan.attempts) <= len(static.attempts)
    assert [a.attempt for a in plan.attempts] == [
        a.attempt for a in static.attempts[: len(plan.attempts)]
    ]
    verdict = classify(failure.decline_code, failure.advice_codes)
    min_gap = timedelta(hours=max(policy.min_gap_hours, verdict.min_delay_hours))
    instants = [failure.failed_at] + [a.at for a in plan.attempts]
    for earlier, later in itertools.pairwise(instants):
        assert later > earlier and later - earlier >= min_gap
    settings_ = policy.adaptive
    assert settings_ is not None
    calendar = customer_calendar(policy, failure.country)
    own = CardAttempt(
        card="card_1",
        at=failure.failed_at.astimezone(UTC),
        invoice=failure.invoice,
        merchant_id="m",
        amount=1000,
        reattempt=False,
    )
    for attempt, fixed in zip(plan.attempts, static.attempts, strict=False):
        at = attempt.at
        assert at - failure.failed_at <= timedelta(days=policy.max_duration_days)
        if failure.next_renewal_at is not None:
            assert at < failure.next_renewal_at
        assert not any(b.start <= at < b.end for b in policy.blackouts)
        if at != fixed.at:  # moved: inside the allowed days and local hours
            local = to_local(at, failure.timezone)
            minute = local.hour * 60 + local.minute
            assert calendar.is_business_day(local.date()), local
            assert settings_.hours_start <= minute < settings_.hours_end, local
        others = [
            *history,
            own,
            *(
                CardAttempt(
                    card="card_1", at=a.at, invoice=failure.invoice, merchant_id="m", amount=1000
                )
                for a in plan.attempts
                if a is not attempt
            ),
        ]
        assert (
            limit_reason(
                network=failure.network,
                visa_category=verdict.visa_category,
                visa_limited=default_taxonomy().visa_limited_categories,
                limits=policy.networks,
                card=failure.card,
                merchant_id="m",
                amount=1000,
                candidate=at,
                history=others,
            )
            is None
        )


@settings(max_examples=150, deadline=None)
@given(card_failures(), adaptive_policies(), LOGS, st.integers(0, 2**32))
def test_no_adaptive_plan_breaks_a_guardrail(case, policy, state, seed) -> None:
    failure, history = case
    assert_within_guardrails(failure, policy, history, state, seed)


@settings(max_examples=40, deadline=None)
@given(card_failures(codes=HARD_CODES + ACTION_CODES), adaptive_policies(), LOGS, st.integers())
def test_hard_declines_and_customer_action_are_never_retried_by_learning(
    case, policy, state, seed
) -> None:
    failure, history = case
    assert plan_adaptive(failure, policy, state, seed=seed, history=history).decision == (
        plan_retries(failure, policy, history=history)
    )


@settings(max_examples=40, deadline=None)
@given(card_failures(), adaptive_policies(), st.lists(records(), max_size=40), st.integers())
def test_the_same_log_and_seed_give_the_same_plan(case, policy, rows, seed) -> None:
    failure, history = case
    first = plan_adaptive(failure, policy, learner_state(rows * 8), seed=seed, history=history)
    # The log read again, in another order: the state is a function of the rows, not their order.
    again = plan_adaptive(
        failure, policy, learner_state(list(reversed(rows * 8))), seed=seed, history=history
    )
    assert first == again


@settings(max_examples=40, deadline=None)
@given(card_failures(), adaptive_policies(), st.integers())
def test_a_cold_start_is_the_static_plan(case, policy, seed) -> None:
    failure, history = case
    cold = dataclasses.replace(
        policy, adaptive=dataclasses.replace(policy.adaptive, min_attempts=10**6)
    )
    plan = plan_adaptive(failure, cold, learner_state([]), seed=seed, history=history)
    static = plan_retries(failure, cold, history=history)
    if isinstance(static, Retry):
        assert isinstance(plan.decision, Retry)
        assert [a.at for a in plan.decision.attempts] == [a.at for a in static.attempts]
        assert all(c.propensity == 1.0 and c.static for c in plan.choices)
    else:
        assert plan.decision == static
