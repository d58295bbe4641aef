"""The runtime's plan of a failure: the static planner, or the adaptive one with what the
tenant's log has taught, each attempt carrying the record of its decision.

    plan_failure(failure, policy, history=…, learning=None) → Decision

- A policy without `strategy = "adaptive"`, or no `learning` given: `plan_retries`, unchanged
  (its attempts carry no timing).
- A customer in the sticky holdout (`learning.holdout`, decided by the shell from
  `analytics.uplift.in_holdout`): the static plan, each attempt recorded as arm `holdout`
  with propensity 1.
- Otherwise `adaptive_planner.plan_adaptive(failure, policy, learning.state, seed=…)`: every
  attempt recorded as arm `adaptive`, with its slot, the static slot, its propensity, its
  explanation and figures (`attempt_timing.AttemptTiming`); when the guardrails allow no slot
  for its first attempt, the static plan stands, recorded as arm `static`.

`prompt_timing` records the prompt retry after a card update (arm `static`: never learned).
Pure: the learner's state, the seed and the holdout membership are arguments (read by
`recovery.learning`), so a decision is reproducible from the log and the seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from recoup.dunning.adaptive import SlotDecision
from recoup.dunning.adaptive_counts import LearnerState
from recoup.dunning.adaptive_planner import plan_adaptive
from recoup.dunning.adaptive_slots import Slot, slot_of
from recoup.dunning.attempt_timing import AttemptTiming
from recoup.dunning.limits import CardAttempt
from recoup.dunning.outcomes import Decision, PlannedAttempt, Retry
from recoup.dunning.planner import Failure, plan_retries
from recoup.dunning.policy import DunningPolicy
from recoup.dunning.taxonomy import Taxonomy


@dataclass(frozen=True, kw_only=True)
class Learning:
    """What the shell read for one adaptive decision: the tenant's learner state, its seed,
    and whether the customer is in the holdout."""

    state: LearnerState
    seed: int
    holdout: bool = False
    holdout_share: float = 0.0


def slot_figures(slot: Slot) -> dict[str, int | str]:
    return {
        "band_start": slot.band_start,
        "band_minutes": slot.band_minutes,
        "weekday": slot.weekday,
        "dom_class": slot.dom_class,
    }


def slot_from_figures(figures: object) -> Slot | None:
    """The slot stored by `slot_figures` (None: not one)."""
    if not isinstance(figures, dict):
        return None
    try:
        return Slot(
            band_start=int(figures["band_start"]),
            band_minutes=int(figures["band_minutes"]),
            weekday=int(figures["weekday"]),
            dom_class=str(figures["dom_class"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _static_timing(
    attempt: PlannedAttempt, band_minutes: int, country: str | None, *, arm: str, why: str
) -> AttemptTiming:
    slot = slot_of(attempt.local, band_minutes, country)
    return AttemptTiming(
        arm="holdout" if arm == "holdout" else "static",
        slot=slot.label,
        static_slot=slot.label,
        propensity=1.0,
        explanation=f"{slot.label}: {why}",
        figures={"slot": slot_figures(slot), "static_slot": slot_figures(slot)},
    )


def _adaptive_timing(decision: SlotDecision, static: Slot) -> AttemptTiming:
    return AttemptTiming(
        arm="adaptive",
        slot=decision.slot.label,
        static_slot=static.label,
        propensity=decision.propensity,
        explanation=decision.explanation,
        figures={
            "estimate": decision.estimate,
            "static_estimate": decision.static_estimate,
            "explored": decision.explored,
            "slot": slot_figures(decision.slot),
            "static_slot": slot_figures(static),
        },
    )


def _with_timings(decision: Retry, timings: Sequence[AttemptTiming]) -> Retry:
    attempts = tuple(replace(a, timing=t) for a, t in zip(decision.attempts, timings, strict=True))
    return replace(decision, attempts=attempts)


def plan_failure(
    failure: Failure,
    policy: DunningPolicy,
    *,
    history: Sequence[CardAttempt] = (),
    learning: Learning | None = None,
    taxonomy: Taxonomy | None = None,
) -> Decision:
    """The plan of `failure` (rules in the module docstring)."""
    settings = policy.adaptive
    if settings is None or learning is None:
        return plan_retries(failure, policy, history=history, taxonomy=taxonomy)
    if learning.holdout:
        static = plan_retries(failure, policy, history=history, taxonomy=taxonomy)
        if not isinstance(static, Retry):
            return static
        why = (
            f"the static slot (holdout: {100 * learning.holdout_share:g}% of customers stay "
            "on the static schedule, to measure uplift)"
        )
        return _with_timings(
            static,
            [
                _static_timing(a, settings.band_minutes, failure.country, arm="holdout", why=why)
                for a in static.attempts
            ],
        )
    plan = plan_adaptive(
        failure, policy, learning.state, seed=learning.seed, history=history, taxonomy=taxonomy
    )
    if not isinstance(plan.decision, Retry):
        return plan.decision
    if not plan.choices:  # no slot the guardrails allow: the static plan, recorded as such
        why = "the static slot (no learned slot is allowed here)"
        band = settings.band_minutes
        return _with_timings(
            plan.decision,
            [
                _static_timing(a, band, failure.country, arm="static", why=why)
                for a in plan.decision.attempts
            ],
        )
    static = plan_retries(failure, policy, history=history, taxonomy=taxonomy)
    fixed = static.attempts if isinstance(static, Retry) else ()
    timings = []
    for k, choice in enumerate(plan.choices):
        own = fixed[k].local if k < len(fixed) else plan.decision.attempts[k].local
        timings.append(
            _adaptive_timing(choice, slot_of(own, settings.band_minutes, failure.country))
        )
    return _with_timings(plan.decision, timings)


def prompt_timing(
    prompt: Sequence[PlannedAttempt], policy: DunningPolicy, country: str | None
) -> tuple[PlannedAttempt, ...]:
    """The prompt retry after a card update, recorded (arm `static`) under an adaptive
    policy; unchanged under a static one."""
    if policy.adaptive is None:
        return tuple(prompt)
    why = "the prompt retry on the updated card (not learned)"
    band = policy.adaptive.band_minutes
    return tuple(
        replace(p, timing=_static_timing(p, band, country, arm="static", why=why)) for p in prompt
    )


__all__ = ["Learning", "plan_failure", "prompt_timing", "slot_figures", "slot_from_figures"]
