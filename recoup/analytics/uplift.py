"""Proof of uplift: the sticky holdout, the uplift per cohort with its interval, and the
off-policy estimate of a candidate policy before anyone turns it on.

- **Holdout** (`in_holdout`): a customer is held out, and stays on the static policy, when the
  SHA-256 point of (tenant, "holdout:" + name, customer) (`dunning.experiments.arm_fraction`)
  is below the share (10% by default). Sticky: every invoice of a customer, in every process,
  lands on the same side; raising the share only moves customers into the holdout.
- **Uplift** (`two_proportion_difference`): treatment rate − holdout rate, with Newcombe's
  hybrid score interval (Newcombe 1998, method 10: the two Wilson intervals combined), which
  keeps its coverage near the nominal rate for small arms and rates near 0 or 1 where the
  Wald interval does not.
- **Cohorts** (`cohort_uplift`): a cohort's measurement is "in progress" until its
  observation window (30 days after the failure, by default) has closed for every invoice in
  it; the interval as it stands is given, but no verdict. In A/A mode both arms ran the static
  policy, so a significant difference is a false positive (expected in 1 − confidence of
  cohorts), and the verdict says so.
- **Off-policy estimate** (`snips`): a candidate policy's recovery from logged decisions, by
  self-normalised inverse propensity weighting (Swaminathan and Joachims 2015): each invoice
  weighs the product over its decisions of (the candidate's probability of the logged slot ÷
  the logged propensity), and the estimate is Σ w·r / Σ w. Its interval is the delta method's
  for a ratio, Var ≈ Σ w²(r − V̂)² / (Σ w)², normal, clipped to [0, 1].

Pure: time (`now`) is an argument; standard library only.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from recoup.analytics.recovery.stats import check_confidence, wilson, z_two_sided
from recoup.dunning.experiments import arm_fraction
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import require_aware

DEFAULT_HOLDOUT_SHARE = 0.10
OBSERVATION_WINDOW = timedelta(days=30)
MAX_HOLDOUT_SHARE = 0.5  # beyond half, the "holdout" would be the main arm

UpliftArm = Literal["holdout", "treatment"]


def _share(share: float) -> float:
    if (
        isinstance(share, bool)
        or not isinstance(share, float | int)
        or math.isnan(share)
        or not 0 <= share <= MAX_HOLDOUT_SHARE
    ):
        raise InvalidInput(
            "holdout_share", share, f"expected a share from 0 to {MAX_HOLDOUT_SHARE}"
        )
    return float(share)


def in_holdout(
    tenant: str, customer: str, *, share: float = DEFAULT_HOLDOUT_SHARE, name: str = "default"
) -> bool:
    """Whether `customer` of `tenant` is in the holdout `name` of this share (rules above)."""
    return arm_fraction(tenant, customer, f"holdout:{name}") < _share(share)


def uplift_arm(
    tenant: str, customer: str, *, share: float = DEFAULT_HOLDOUT_SHARE, name: str = "default"
) -> UpliftArm:
    return "holdout" if in_holdout(tenant, customer, share=share, name=name) else "treatment"


@dataclass(frozen=True, kw_only=True)
class Difference:
    """treatment rate − holdout rate and its interval at `confidence`."""

    treatment_successes: int
    treatment_total: int
    holdout_successes: int
    holdout_total: int
    difference: float
    low: float
    high: float
    confidence: float

    @property
    def significant(self) -> bool:
        """The interval excludes no difference."""
        return self.low > 0 or self.high < 0


def two_proportion_difference(
    treatment_successes: int,
    treatment_total: int,
    holdout_successes: int,
    holdout_total: int,
    *,
    confidence: float = 0.95,
) -> Difference:
    """Newcombe's hybrid score interval for p_treatment − p_holdout (module docstring)."""
    if treatment_total <= 0 or holdout_total <= 0:
        raise InvalidInput(
            "total", (treatment_total, holdout_total), "expected at least one invoice in each arm"
        )
    check_confidence(confidence)
    p1 = treatment_successes / treatment_total
    p2 = holdout_successes / holdout_total
    w1 = wilson(treatment_successes, treatment_total, confidence)
    w2 = wilson(holdout_successes, holdout_total, confidence)
    d = p1 - p2
    low = d - math.sqrt((p1 - w1.low) ** 2 + (w2.high - p2) ** 2)
    high = d + math.sqrt((w1.high - p1) ** 2 + (p2 - w2.low) ** 2)
    return Difference(
        treatment_successes=treatment_successes,
        treatment_total=treatment_total,
        holdout_successes=holdout_successes,
        holdout_total=holdout_total,
        difference=d,
        low=max(-1.0, low),
        high=min(1.0, high),
        confidence=confidence,
    )


@dataclass(frozen=True, kw_only=True)
class InvoiceOutcome:
    """One failed invoice: its cohort (the caller's grouping, e.g. the failure's month), its
    arm, when it failed and whether it was recovered (so far)."""

    cohort: str
    arm: UpliftArm
    failed_at: datetime
    recovered: bool

    def __post_init__(self) -> None:
        require_aware("failed_at", self.failed_at)


@dataclass(frozen=True, kw_only=True)
class CohortUplift:
    cohort: str
    closes_at: datetime  # when the last invoice's observation window closes
    in_progress: bool
    difference: Difference | None  # None while an arm is empty
    aa: bool
    verdict: str


def _verdict(
    difference: Difference | None, *, in_progress: bool, closes: datetime, aa: bool
) -> str:
    if in_progress:
        return f"measurement in progress (the observation window closes {closes:%Y-%m-%d})"
    if difference is None:
        return "no verdict: an arm has no invoices"
    points = (
        f"{100 * difference.difference:+.1f} points "
        f"[{100 * difference.low:+.1f}, {100 * difference.high:+.1f}] "
        f"at {100 * difference.confidence:g}%"
    )
    if aa:
        return f"A/A: {points}; " + (
            "a false positive (both arms ran the static policy)"
            if difference.significant
            else "no difference, as expected with the same policy in both arms"
        )
    if not difference.significant:
        return f"{points}: not significant"
    return f"{points}: {'uplift' if difference.difference > 0 else 'harm'}"


def cohort_uplift(
    outcomes: Iterable[InvoiceOutcome],
    *,
    now: datetime,
    window: timedelta = OBSERVATION_WINDOW,
    confidence: float = 0.95,
    aa: bool = False,
) -> list[CohortUplift]:
    """The uplift of each cohort (sorted by name), "in progress" until `now` is past every
    invoice's failure + `window`."""
    require_aware("now", now)
    by_cohort: dict[str, list[InvoiceOutcome]] = defaultdict(list)
    for outcome in outcomes:
        by_cohort[outcome.cohort].append(outcome)
    report: list[CohortUplift] = []
    for name in sorted(by_cohort):
        rows = by_cohort[name]
        closes = max(r.failed_at for r in rows) + window
        arms = {
            arm: [r.recovered for r in rows if r.arm == arm] for arm in ("treatment", "holdout")
        }
        difference = (
            two_proportion_difference(
                sum(arms["treatment"]),
                len(arms["treatment"]),
                sum(arms["holdout"]),
                len(arms["holdout"]),
                confidence=confidence,
            )
            if arms["treatment"] and arms["holdout"]
            else None
        )
        in_progress = now < closes
        report.append(
            CohortUplift(
                cohort=name,
                closes_at=closes,
                in_progress=in_progress,
                difference=difference,
                aa=aa,
                verdict=_verdict(difference, in_progress=in_progress, closes=closes, aa=aa),
            )
        )
    return report


@dataclass(frozen=True, kw_only=True)
class LoggedInvoice:
    """What the log says of one invoice for an off-policy estimate: whether it was recovered,
    and for each of its decisions the logged propensity of the slot taken and the candidate
    policy's probability of that same slot."""

    recovered: bool
    decisions: tuple[tuple[float, float], ...]  # (logged propensity, candidate's probability)

    @property
    def weight(self) -> float:
        weight = 1.0
        for logged, candidate in self.decisions:
            if not 0 < logged <= 1 or not 0 <= candidate <= 1:
                raise InvalidInput(
                    "propensity", (logged, candidate), "expected 0 < logged ≤ 1, 0 ≤ candidate ≤ 1"
                )
            weight *= candidate / logged
        return weight


@dataclass(frozen=True, kw_only=True)
class PolicyEstimate:
    """A candidate policy's estimated recovery rate with its interval; `effective_invoices`
    is (Σ w)² / Σ w², how many invoices the estimate is worth."""

    value: float
    low: float
    high: float
    invoices: int
    effective_invoices: float
    confidence: float
    method: str = "self-normalised inverse propensity, delta-method interval"


def snips(invoices: Sequence[LoggedInvoice], *, confidence: float = 0.95) -> PolicyEstimate | None:
    """The self-normalised IPS estimate (module docstring); None when no logged invoice is one
    the candidate could have produced (Σ w = 0)."""
    z = z_two_sided(confidence)
    weights = [i.weight for i in invoices]
    total = sum(weights)
    if total <= 0:
        return None
    rewards = [1.0 if i.recovered else 0.0 for i in invoices]
    value = sum(w * r for w, r in zip(weights, rewards, strict=True)) / total
    variance = sum(w * w * (r - value) ** 2 for w, r in zip(weights, rewards, strict=True)) / (
        total * total
    )
    half = z * math.sqrt(variance)
    return PolicyEstimate(
        value=value,
        low=max(0.0, value - half),
        high=min(1.0, value + half),
        invoices=len(invoices),
        effective_invoices=total * total / sum(w * w for w in weights),
        confidence=confidence,
    )


__all__ = [
    "DEFAULT_HOLDOUT_SHARE",
    "MAX_HOLDOUT_SHARE",
    "OBSERVATION_WINDOW",
    "CohortUplift",
    "Difference",
    "InvoiceOutcome",
    "LoggedInvoice",
    "PolicyEstimate",
    "UpliftArm",
    "cohort_uplift",
    "in_holdout",
    "snips",
    "two_proportion_difference",
    "uplift_arm",
]
