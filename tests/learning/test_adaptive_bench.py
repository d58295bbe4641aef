"""The adaptive policy in the learning benchmark: registered, within the static plan's count,
the static plan on a cold start, reproducible, and the proof's figures computable."""

from __future__ import annotations

import dataclasses

from bench.learning.adaptive import AdaptiveTiming, bench_policy
from bench.learning.policies import FACTORIES, static_plan
from bench.learning.population import population
from bench.learning.proof import aa_false_positives, coverage_run
from bench.learning.simulate import simulate
from recoup.dunning import preset
from recoup.payments.world import packaged_world

FAILURES = population(4, size=120, months=1)
WORLD = packaged_world("night-owl")


def test_the_adaptive_policy_is_registered() -> None:
    assert isinstance(FACTORIES["adaptive"](WORLD), AdaptiveTiming)


def test_a_cold_start_in_the_benchmark_is_the_static_default() -> None:
    cold = bench_policy()
    assert cold.adaptive is not None
    cold = dataclasses.replace(
        cold, adaptive=dataclasses.replace(cold.adaptive, min_attempts=10**6)
    )
    adaptive = simulate(4, WORLD, AdaptiveTiming(cold), FAILURES)
    static = simulate(4, WORLD, FACTORIES["static default"](WORLD), FAILURES)
    assert adaptive.expected_by_invoice == static.expected_by_invoice
    assert (adaptive.recovered, adaptive.attempts) == (static.recovered, static.attempts)


def test_learning_never_plans_more_tries_than_the_static_default_and_is_reproducible() -> None:
    warm = bench_policy()
    assert warm.adaptive is not None
    warm = dataclasses.replace(warm, adaptive=dataclasses.replace(warm.adaptive, min_attempts=0))
    first, again = AdaptiveTiming(warm), AdaptiveTiming(warm)
    one = simulate(4, WORLD, first, FAILURES)
    two = simulate(4, WORLD, again, FAILURES)
    assert one.expected_by_invoice == two.expected_by_invoice
    business = preset("business-days")
    for failure in FAILURES:
        planned = first.counterfactual[failure.invoice]
        assert len(planned) <= len(static_plan(business, failure.failure))
    assert any(
        p.decision.choice is not None and not p.decision.choice.static
        for tries in first.counterfactual.values()
        for p in tries
    ), "some tries should have moved"


def test_the_proofs_figures_are_computed() -> None:
    false, runs = aa_false_positives(2, size=60, months=1, world=WORLD)
    assert runs == 2 and 0 <= false <= 2
    run = coverage_run(1, size=80, months=1, world=WORLD)
    assert run.low <= run.high and -1 <= run.true_effect <= 1
