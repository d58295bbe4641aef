"""The adaptive strategy: its policy keys, the learner's state, the choice of a slot (cold
start, the best estimate, bounded exploration, propensity, explanation) and the planner."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta

import pytest

from recoup.dunning import Failure, Retry, parse_policy, plan_retries, preset
from recoup.dunning.adaptive import Candidate, choose_slot
from recoup.dunning.adaptive_counts import LearnerCounts, LearnerState, learner_state
from recoup.dunning.adaptive_planner import plan_adaptive
from recoup.dunning.adaptive_slots import AttemptRecord, Context, day_of_month_class, slot_of
from recoup.errors import ConfigError

ADAPTIVE = preset("adaptive")
FAILURE = Failure(
    invoice="inv_1",
    failed_at=datetime(2026, 3, 10, 15, 0, tzinfo=UTC),  # Tuesday 11:00 in New York
    timezone="America/New_York",
    country="US",
    decline_code="insufficient_funds",
    network="visa",
    card="card_1",
)


def context(attempt: int = 1) -> Context:
    return Context(
        decline_class="soft",
        decline_code="insufficient_funds",
        region="US",
        network="visa",
        attempt=attempt,
    )


def evening_log(n: int = 4000, *, attempts: tuple[int, ...] = (1, 2, 3, 4)) -> LearnerState:
    """A log where 18:00–19:00 local recovers 40% and every other hour 20%."""
    rng = random.Random(5)
    rows = []
    for _ in range(n):
        hour = rng.randrange(8, 20)
        local = datetime(2026, 2, 2) + timedelta(days=rng.randrange(56), hours=hour)
        rows.append(
            AttemptRecord(
                context=context(rng.choice(attempts)),
                slot=slot_of(local, 60, "US"),
                success=rng.random() < (0.40 if hour == 18 else 0.20),
                static=hour == 10,
            )
        )
    return learner_state(rows)


def test_the_adaptive_preset_is_business_days_with_learned_timing() -> None:
    business = preset("business-days")
    assert ADAPTIVE.gaps == business.gaps
    assert ADAPTIVE.max_duration_days == business.max_duration_days
    assert ADAPTIVE.adaptive is not None
    assert ADAPTIVE.adaptive.exploration == 0.2
    assert ADAPTIVE.adaptive.holdout_share == 0.10
    assert business.adaptive is None  # the static presets stay static


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('strategy = "smart"', "strategy"),
        ("[adaptive]\nexploration = 0.2", "adaptive"),  # a table without the strategy
        ('strategy = "adaptive"\n[adaptive]\nlearning_rate = 1', "adaptive.learning_rate"),
        ('strategy = "adaptive"\n[adaptive]\nexploration = 1.5', "adaptive.exploration"),
        ('strategy = "adaptive"\n[adaptive]\nhours_start = "8am"', "adaptive.hours_start"),
        ('strategy = "adaptive"\n[adaptive]\nhours_end = "25:00"', "adaptive.hours_end"),
        ('strategy = "adaptive"\n[adaptive]\nband_minutes = 50', "adaptive.band_minutes"),
        ('strategy = "adaptive"\n[adaptive]\nholdout_share = 0.6', "adaptive.holdout_share"),
        # 19:00–20:00 holds no whole two-hour band anchored at midnight
        (
            'strategy = "adaptive"\n[adaptive]\nhours_start = "19:00"\nband_minutes = 120',
            "adaptive.hours_end",
        ),
    ],
)
def test_adaptive_keys_are_checked_and_named(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policy("gaps = [{ days = 1 }]\n" + text)
    assert caught.value.field == field


def test_bands_lie_wholly_inside_the_hours() -> None:
    policy = parse_policy(
        'gaps = [{ days = 1 }]\nstrategy = "adaptive"\n[adaptive]\n'
        'hours_start = "07:30"\nhours_end = "24:00"\nband_minutes = 120'
    )
    assert policy.adaptive is not None
    assert policy.adaptive.bands == tuple(range(8 * 60, 24 * 60, 120))


@pytest.mark.parametrize(
    ("day", "cls"),
    [
        (datetime(2026, 1, 1), "month_start"),
        (datetime(2026, 1, 15), "mid_month"),  # the US mid-month payday
        (datetime(2026, 1, 25), "late_month"),  # Japan's payday
        (datetime(2026, 2, 26), "month_end"),  # February's last three days start on the 26th
        (datetime(2026, 1, 26), "late_month"),
        (datetime(2026, 1, 9), "other"),
    ],
)
def test_day_of_month_classes_follow_the_paydays(day: datetime, cls: str) -> None:
    assert day_of_month_class(day.date()) == cls


@pytest.mark.parametrize(
    ("day", "cls"),
    [
        (datetime(2026, 1, 15), "payday"),  # the US mid-month payday, a Thursday
        (datetime(2026, 1, 16), "payday+1"),
        (datetime(2026, 2, 13), "payday"),  # the 15th is a Sunday: paid on Friday the 13th
        (datetime(2026, 2, 15), "payday+2"),
        (datetime(2026, 2, 16), "other"),
    ],
)
def test_a_country_with_paydays_classes_days_by_the_days_since_its_payday(
    day: datetime, cls: str
) -> None:
    assert day_of_month_class(day.date(), "US") == cls


def test_counts_kept_one_attempt_at_a_time_equal_the_state_of_the_log() -> None:
    rows = [
        AttemptRecord(
            context=context(n % 4 + 1),
            slot=slot_of(datetime(2026, 3, 2 + n % 5, 8 + n % 12), 60, "US"),
            success=n % 3 == 0,
            static=n % 2 == 0,
        )
        for n in range(200)
    ]
    counts = LearnerCounts()
    for row in rows:
        counts.add(row)
    assert dict(counts.state().counts) == dict(learner_state(rows).counts)


def test_a_cold_start_plans_exactly_as_the_static_policy() -> None:
    plan = plan_adaptive(FAILURE, ADAPTIVE, learner_state([]), seed=1)
    static = plan_retries(FAILURE, preset("business-days"))
    assert isinstance(plan.decision, Retry) and isinstance(static, Retry)
    assert [a.at for a in plan.decision.attempts] == [a.at for a in static.attempts]
    assert all(c.static and c.propensity == 1.0 for c in plan.choices)
    assert "cold start: 0 attempts logged for soft declines, 100 needed" in (
        plan.choices[0].explanation
    )


def test_a_clearly_better_hour_takes_the_attempts_and_says_why() -> None:
    plan = plan_adaptive(FAILURE, ADAPTIVE, evening_log(), seed=3)
    assert isinstance(plan.decision, Retry)
    hours = [a.local.hour for a in plan.decision.attempts]
    assert hours.count(18) >= 3, hours
    chosen = next(c for c in plan.choices if c.slot.band_start == 18 * 60)
    assert chosen.explanation.startswith(f"{chosen.slot.label}: ")
    assert "18:00–19:00" in chosen.explanation
    assert "for the static slot" in chosen.explanation
    assert chosen.estimate is not None and chosen.static_estimate is not None
    assert chosen.estimate > chosen.static_estimate
    assert "moved to learned slots" in plan.decision.reason


def test_a_context_never_seen_inherits_its_parents_lifts() -> None:
    # Only attempts 1 and 2 are logged; attempt 4 has no rows of its own.
    state = evening_log(attempts=(1, 2))
    plan = plan_adaptive(FAILURE, ADAPTIVE, state, seed=3)
    assert isinstance(plan.decision, Retry)
    assert plan.decision.attempts[3].local.hour == 18


def test_without_exploration_the_best_estimate_is_certain() -> None:
    settings = dataclasses.replace(ADAPTIVE.adaptive, exploration=0.0)  # type: ignore[arg-type]
    plan = plan_adaptive(
        FAILURE, dataclasses.replace(ADAPTIVE, adaptive=settings), evening_log(), seed=9
    )
    assert all(c.propensity == 1.0 and not c.explored for c in plan.choices)


def _candidates() -> list[Candidate]:
    base = datetime(2026, 3, 11, tzinfo=UTC)
    return [
        Candidate(
            slot=slot_of(datetime(2026, 3, 11, hour), 60, "US"),
            at=base + timedelta(hours=hour),
            static=hour == 10,
        )
        for hour in (10, 14, 18)
    ]


def test_the_propensity_is_the_share_of_seeds_that_choose_the_slot() -> None:
    # A little evidence: the choice is uncertain, so exploration and the draws both matter.
    state = evening_log(600)
    settings = dataclasses.replace(
        ADAPTIVE.adaptive,  # type: ignore[arg-type]
        exploration=0.5,
        propensity_draws=1000,
    )
    decisions = [
        choose_slot(state, context(), _candidates(), settings, rng_seed=seed, invoice="inv_1")
        for seed in range(300)
    ]
    for band in {d.slot.band_start for d in decisions}:
        share = sum(d.slot.band_start == band for d in decisions) / len(decisions)
        estimated = next(d.propensity for d in decisions if d.slot.band_start == band)
        assert abs(share - estimated) < 0.09, (band, share, estimated)


def test_a_decision_is_reproducible_from_the_log_and_the_seed() -> None:
    settings = ADAPTIVE.adaptive
    assert settings is not None
    first = choose_slot(
        evening_log(600), context(), _candidates(), settings, rng_seed=42, invoice="inv_1"
    )
    again = choose_slot(
        evening_log(600), context(), _candidates(), settings, rng_seed=42, invoice="inv_1"
    )
    assert first == again


def test_a_static_policy_is_planned_statically() -> None:
    business = preset("business-days")
    plan = plan_adaptive(FAILURE, business, evening_log(), seed=1)
    assert plan.decision == plan_retries(FAILURE, business)
    assert plan.choices == ()
