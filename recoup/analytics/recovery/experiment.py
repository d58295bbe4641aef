"""Two policies compared: each arm's recovery with its interval, the difference, whether it is
significant, and how many more finished invoices each arm needs when it is not yet.

- The arms are the invoices grouped by `invoice.policy` (the arm's policy name); only finished
  invoices count, running ones are reported per arm.
- The test is the pooled two-proportion z-test, two-sided; significant when p < 1 − confidence.
- "Still needed" uses the observed rates as the effect to detect: the Fleiss sample size for a
  two-sided test at the confidence and 80% power (`stats.needed_per_arm`), minus what each arm
  already has (never below 0; 0 when significant). None when the rates are equal or an arm is
  empty: no sample size can be read off a difference of zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recoup.analytics.recovery.buckets import Bucket, make_bucket
from recoup.analytics.recovery.stats import POWER, needed_per_arm, two_proportion_p_value
from recoup.dunning.invoice import Invoice, InvoiceState


@dataclass(frozen=True, kw_only=True)
class Arm:
    policy: str
    running: int
    recovery: Bucket  # count = finished invoices of the arm


@dataclass(frozen=True, kw_only=True)
class ExperimentComparison:
    a: Arm
    b: Arm
    difference: float | None  # rate of b − rate of a
    p_value: float | None
    significant: bool
    confidence: float
    power: float
    needed_per_arm: int | None  # finished invoices per arm for the observed difference
    more_needed_a: int | None
    more_needed_b: int | None


def arms_of(invoices: Sequence[Invoice], chosen: tuple[str, str] | None) -> tuple[str, str] | None:
    """The two policies to compare: the chosen ones, else the two seen (by name) when exactly
    two are."""
    if chosen is not None:
        return chosen
    seen = sorted({i.policy for i in invoices})
    return (seen[0], seen[1]) if len(seen) == 2 else None


def compare(
    invoices: Sequence[Invoice],
    arms: tuple[str, str],
    *,
    min_volume: int,
    confidence: float,
) -> ExperimentComparison:
    built = [
        _arm(invoices, policy, min_volume=min_volume, confidence=confidence) for policy in arms
    ]
    a, b = built
    xa, na, xb, nb = a.recovery.recovered, a.recovery.count, b.recovery.recovered, b.recovery.count
    p_value = two_proportion_p_value(xa, na, xb, nb)
    significant = p_value is not None and p_value < 1 - confidence
    difference = xb / nb - xa / na if na and nb else None
    needed = (
        needed_per_arm(xa / na, xb / nb, confidence)
        if na and nb and difference is not None
        else None
    )
    if significant:
        more_a: int | None = 0
        more_b: int | None = 0
    elif needed is None:
        more_a = more_b = None
    else:
        more_a, more_b = max(0, needed - na), max(0, needed - nb)
    return ExperimentComparison(
        a=a,
        b=b,
        difference=difference,
        p_value=p_value,
        significant=significant,
        confidence=confidence,
        power=POWER,
        needed_per_arm=needed,
        more_needed_a=more_a,
        more_needed_b=more_b,
    )


def _arm(invoices: Sequence[Invoice], policy: str, *, min_volume: int, confidence: float) -> Arm:
    mine = [i for i in invoices if i.policy == policy]
    finished = [i for i in mine if i.state.is_judged]
    recovered = sum(1 for i in finished if i.state is InvoiceState.RECOVERED)
    return Arm(
        policy=policy,
        running=len(mine) - len(finished),
        recovery=make_bucket(
            policy, recovered, len(finished), min_volume=min_volume, confidence=confidence
        ),
    )


__all__ = ["Arm", "ExperimentComparison", "arms_of", "compare"]
