"""The adaptive policy in the learning benchmark: `recoup.dunning.adaptive_planner` planning
each failure from the counts of every answer observed so far, as the runtime would from its
attempt log. It never sees the world: only the failure, and the answers to its own tries.

    AdaptiveTiming(preset("adaptive"))                       the policy as shipped
    AdaptiveTiming(policy, holdout_share=0.1)                customers held out on the static plan
    AdaptiveTiming(policy, holdout_share=0.1, aa=True)       A/A: everyone on the static plan

The learner's state is a `LearnerCounts` that `observe` adds to in place (the harness passes
it back to every `plan`), so learning costs one count per answer, not a copy of the counts.
The planner's seed is drawn from the harness's per-invoice `rng`: a run is reproducible.
Importing this module registers "adaptive" in `bench.learning.policies.FACTORIES`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

from bench.learning.policies import FACTORIES, ObservedAttempt, PlannedTry, static_plan
from bench.learning.population import FailureContext
from recoup.analytics.uplift import in_holdout
from recoup.dunning import DunningPolicy, Retry, preset
from recoup.dunning.adaptive import SlotDecision
from recoup.dunning.adaptive_counts import LearnerCounts
from recoup.dunning.adaptive_planner import context_for, plan_adaptive
from recoup.dunning.adaptive_slots import AttemptRecord, slot_of
from recoup.dunning.taxonomy import classify

BENCH_TENANT = "bench"
# Monte Carlo draws per decision's propensity here: the benchmark makes ~10⁵ decisions a run
# and reads propensities only for the proof's off-policy estimate (the shipped default: 200).
BENCH_PROPENSITY_DRAWS = 20


def bench_policy(policy: DunningPolicy | None = None) -> DunningPolicy:
    """The adaptive preset with the benchmark's propensity draws."""
    base = policy or preset("adaptive")
    assert base.adaptive is not None
    return dataclasses.replace(
        base,
        adaptive=dataclasses.replace(base.adaptive, propensity_draws=BENCH_PROPENSITY_DRAWS),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Planned:
    """What a try carries for the learner: its slot decision (None on the static plan)."""

    choice: SlotDecision | None
    holdout: bool


class AdaptiveTiming:
    """The adaptive policy (module docstring). `counterfactual` keeps, per invoice, the tries
    the adaptive planner would have made (the holdout's too): the proof compares the two
    plans in the world, which the policy itself never sees."""

    def __init__(
        self,
        policy: DunningPolicy,
        *,
        name: str = "adaptive",
        holdout_share: float = 0.0,
        aa: bool = False,
        holdout_name: str = "default",
    ) -> None:
        if policy.adaptive is None:
            raise ValueError(f"policy {policy.name} is not adaptive")
        self.name, self.policy = name, policy
        self.holdout_share, self.aa, self.holdout_name = holdout_share, aa, holdout_name
        self.held: set[str] = set()
        self.recovered: set[str] = set()
        self.counterfactual: dict[str, tuple[PlannedTry, ...]] = {}

    def initial_state(self) -> LearnerCounts:
        return LearnerCounts()

    def is_held_out(self, failure: FailureContext) -> bool:
        return self.holdout_share > 0 and in_holdout(
            BENCH_TENANT, failure.customer, share=self.holdout_share, name=self.holdout_name
        )

    def plan(
        self, failure: FailureContext, learner_state: Any, rng: random.Random
    ) -> Sequence[PlannedTry]:
        assert isinstance(learner_state, LearnerCounts)
        plan = plan_adaptive(
            failure.failure, self.policy, learner_state.state(), seed=rng.getrandbits(63)
        )
        adaptive: tuple[PlannedTry, ...] = ()
        if isinstance(plan.decision, Retry):
            adaptive = tuple(
                PlannedTry(
                    at=a.at,
                    propensity=c.propensity,
                    decision=Planned(choice=c, holdout=False),
                )
                for a, c in zip(plan.decision.attempts, plan.choices, strict=True)
            )
        self.counterfactual[failure.invoice] = adaptive
        if self.aa or self.is_held_out(failure):
            self.held.add(failure.invoice)
            return [
                PlannedTry(at=a.at, propensity=1.0, decision=Planned(choice=None, holdout=True))
                for a in static_plan(self.policy, failure.failure)
            ]
        return adaptive

    def observe(self, learner_state: Any, attempt: ObservedAttempt) -> Any:
        assert isinstance(learner_state, LearnerCounts)
        f = attempt.failure.failure
        planned = attempt.planned.decision
        assert isinstance(planned, Planned)
        settings = self.policy.adaptive
        assert settings is not None
        learner_state.add(
            AttemptRecord(
                context=context_for(f, attempt.attempt, classify(f.decline_code, f.advice_codes)),
                slot=slot_of(attempt.local, settings.band_minutes, f.country),
                success=attempt.succeeded,
                static=planned.choice is None or planned.choice.static,
            )
        )
        if attempt.succeeded:
            self.recovered.add(attempt.failure.invoice)
        return learner_state


FACTORIES["adaptive"] = lambda world: AdaptiveTiming(bench_policy())

__all__ = ["BENCH_PROPENSITY_DRAWS", "AdaptiveTiming", "Planned", "bench_policy"]
