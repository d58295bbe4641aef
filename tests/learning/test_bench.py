"""The learning benchmark's harness (bench/learning) at a small size: the policies keep their
promises, the learner only ever sees the past, the draws are common to every policy, and the
table prints."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from bench.learning.__main__ import main, run
from bench.learning.policies import (
    FACTORIES,
    NightlyBatch,
    ObservedAttempt,
    PlannedTry,
    Static,
    static_plan,
)
from bench.learning.population import FailureContext, population
from bench.learning.simulate import BadPlan, draw, simulate
from recoup.dunning import preset
from recoup.dunning.taxonomy import DeclineClass, classify
from recoup.payments.world import packaged_world

FAILURES = population(3, size=150, months=1)


def test_the_population_is_the_same_for_the_same_seed_and_ordered() -> None:
    again = population(3, size=150, months=1)
    assert [f.invoice for f in again] == [f.invoice for f in FAILURES]
    instants = [f.failed_at for f in FAILURES]
    assert instants == sorted(instants)
    two = population(3, size=50, months=2)
    assert len(two) == 100 and len({f.invoice for f in two}) == 100


def test_in_the_flat_world_the_oracle_is_the_static_default() -> None:
    world = packaged_world("flat")
    oracle = simulate(3, world, FACTORIES["oracle"](world), FAILURES)
    static = simulate(3, world, FACTORIES["static default"](world), FAILURES)
    assert oracle.expected_by_invoice == pytest.approx(static.expected_by_invoice)
    assert (oracle.recovered, oracle.attempts) == (static.recovered, static.attempts)


@pytest.mark.parametrize("world", ["calibrated", "night-owl"])
def test_the_oracle_expects_at_least_what_the_static_default_does(world: str) -> None:
    loaded = packaged_world(world)
    oracle = simulate(3, loaded, FACTORIES["oracle"](loaded), FAILURES)
    static = simulate(3, loaded, FACTORIES["static default"](loaded), FAILURES)
    assert sum(oracle.expected_by_invoice.values()) > sum(static.expected_by_invoice.values())


def test_the_oracles_tries_keep_the_static_count_and_the_maximum_duration() -> None:
    world = packaged_world("night-owl")
    oracle = FACTORIES["oracle"](world)
    policy = preset("business-days")
    for failure in FAILURES:
        tries = oracle.plan(failure, None, random.Random(0))
        assert len(tries) <= len(static_plan(policy, failure.failure))
        for t in tries:
            assert t.at - failure.failed_at <= timedelta(days=policy.max_duration_days)


def test_only_the_nightly_batch_tries_hard_declines() -> None:
    hard = [
        f
        for f in FAILURES
        if classify(f.failure.decline_code, f.failure.advice_codes).decline_class
        is DeclineClass.NEVER
    ]
    assert hard
    static = Static("static", preset("business-days"))
    for failure in hard:
        assert static.plan(failure, None, random.Random(0)) == []
        assert len(NightlyBatch().plan(failure, None, random.Random(0))) == 4


class Recording:
    """A learner that keeps every observation and checks, at each plan, that it saw nothing
    from the plan's future."""

    name = "recording"

    def __init__(self) -> None:
        self.planned_at: list[Any] = []

    def initial_state(self) -> tuple[ObservedAttempt, ...]:
        return ()

    def plan(self, failure: FailureContext, learner_state: Any, rng: random.Random) -> list[Any]:
        assert all(seen.at <= failure.failed_at for seen in learner_state)
        self.planned_at.append(failure.failed_at)
        return [PlannedTry(at=failure.failed_at + timedelta(days=d)) for d in (1, 4)]

    def observe(self, learner_state: Any, attempt: ObservedAttempt) -> Any:
        return (*learner_state, attempt)


def test_a_learner_is_fed_what_it_observed_and_never_the_future() -> None:
    policy = Recording()
    result = simulate(3, packaged_world(), policy, FAILURES)
    assert len(policy.planned_at) == len(FAILURES)
    assert result.attempts > len(FAILURES)  # the second tries of the unrecovered ones too


def test_the_draws_are_common_to_every_policy() -> None:
    assert draw(3, "inv_1", 1) == draw(3, "inv_1", 1)
    assert draw(3, "inv_1", 1) != draw(3, "inv_1", 2) != draw(4, "inv_1", 2)


def test_a_plan_out_of_order_is_refused() -> None:
    class Backwards(Recording):
        def plan(self, failure: FailureContext, learner_state: Any, rng: random.Random) -> Any:
            return [PlannedTry(at=failure.failed_at - timedelta(hours=1))]

    with pytest.raises(BadPlan):
        simulate(3, packaged_world(), Backwards(), FAILURES)


def test_one_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "2", "--size", "60", "--months", "1"]) == 0
    out = capsys.readouterr().out
    assert "| world | policy |" in out
    for name in ("static default", "payday-aware", "nightly batch", "oracle"):
        assert name in out
    for world in ("calibrated", "night-owl", "flat"):
        assert f"| {world} |" in out


def test_results_come_per_world_policy_and_seed() -> None:
    results = run(seeds=2, size=40, months=1, worlds=["flat"], policies=["static default"])
    assert len(results["flat"]["static default"]) == 2
