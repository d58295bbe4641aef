"""How an attempt of an adaptive policy got its instant: the record each decision leaves.

An attempt planned under `strategy = "adaptive"` carries an `AttemptTiming`, stored with the
attempt in the same write (migration 0016) and shown in the API, the timeline, the dashboard
and `recoup invoices show`:

- `arm`: `adaptive` (the learner placed it, `adaptive.choose_slot`), `holdout` (the customer
  is in the sticky holdout and stays on the static plan, to measure uplift) or `static` (an
  attempt of an adaptive policy the learner never places: the prompt retry after a card update).
- `slot` and `static_slot`: the labels of the slot chosen and of the static plan's own slot.
- `propensity`: the probability the procedure had of choosing this slot (1 for a holdout, a
  static attempt or a cold start), what an off-policy estimate divides by.
- `explanation`: the decision in words; `figures`: its numbers (the estimates, whether it
  explored, and both slots as data, for an off-policy estimate to compare slots with).

Attempts of a static policy carry none (None). Pure: plain data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from recoup.errors import InvalidInput

TimingArm = Literal["adaptive", "holdout", "static"]
TIMING_ARMS: tuple[TimingArm, ...] = ("adaptive", "holdout", "static")
EXPLANATION_MAX = 1000  # characters of a stored explanation


@dataclass(frozen=True, kw_only=True)
class AttemptTiming:
    """The decision behind an attempt's instant (module docstring)."""

    arm: TimingArm
    slot: str
    static_slot: str
    propensity: float
    explanation: str
    figures: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.arm not in TIMING_ARMS:
            raise InvalidInput("arm", self.arm, f"expected one of {list(TIMING_ARMS)}")
        if not (math.isfinite(self.propensity) and 0 < self.propensity <= 1):
            raise InvalidInput("propensity", self.propensity, "expected 0 < propensity ≤ 1")
        if len(self.explanation) > EXPLANATION_MAX:
            raise InvalidInput(
                "explanation", self.explanation[:40], f"expected ≤ {EXPLANATION_MAX} characters"
            )

    @property
    def moved(self) -> bool:
        """Placed somewhere other than the static plan's slot."""
        return self.slot != self.static_slot

    def as_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "slot": self.slot,
            "static_slot": self.static_slot,
            "propensity": self.propensity,
            "explanation": self.explanation,
            "figures": dict(self.figures),
        }


__all__ = ["EXPLANATION_MAX", "TIMING_ARMS", "AttemptTiming", "TimingArm"]
