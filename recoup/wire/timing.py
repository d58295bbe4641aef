"""The response model of an attempt's learned-timing decision (`dunning.attempt_timing`), in
the invoice's timeline (`GET /v1/dunning/invoices/{invoice_id}`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from recoup.dunning.attempt_timing import EXPLANATION_MAX, AttemptTiming


class AttemptTimingOut(BaseModel):
    """How an adaptive policy placed the attempt: absent (null) under a static policy."""

    arm: Literal["adaptive", "holdout", "static"] = Field(
        description=(
            "adaptive: placed by the learner; holdout: the customer is in the sticky holdout "
            "and stays on the static plan (to measure uplift); static: an attempt the learner "
            "never places (the prompt retry after a card update)."
        )
    )
    slot: str = Field(
        max_length=200,
        description="The slot chosen: local hour band, weekday, day-of-month class, e.g. "
        '"Thursday 18:00–19:00 (a payday)".',
    )
    static_slot: str = Field(
        max_length=200, description="The static plan's own slot for this attempt."
    )
    moved: bool = Field(description="The slot chosen is not the static plan's.")
    propensity: float = Field(
        gt=0,
        le=1,
        description=(
            "The probability the procedure had of choosing this slot (1 for a holdout, a "
            "static attempt or a cold start): what an off-policy estimate divides by."
        ),
    )
    explanation: str = Field(
        max_length=EXPLANATION_MAX,
        description=(
            "The decision in words: the slot's estimated success rate ± its spread and the "
            "attempts behind it, against the static slot's."
        ),
    )
    figures: dict[str, Any] = Field(
        description=(
            "The decision's numbers: estimate and static_estimate (success rates from 0 to 1, "
            "or null), explored (a boolean), slot and static_slot (band_start and band_minutes "
            "in minutes after local midnight, weekday 0 = Monday, dom_class)."
        )
    )

    @classmethod
    def of(cls, timing: AttemptTiming | None) -> AttemptTimingOut | None:
        if timing is None:
            return None
        return cls(
            arm=timing.arm,
            slot=timing.slot,
            static_slot=timing.static_slot,
            moved=timing.moved,
            propensity=timing.propensity,
            explanation=timing.explanation,
            figures=dict(timing.figures),
        )


__all__ = ["AttemptTimingOut"]
