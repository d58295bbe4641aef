"""The statistics of the report: Wilson score intervals, the two-proportion z-test, and the
sample size two proportions need to tell a difference apart.

Standard library only (`statistics.NormalDist`): the core installs no numpy or scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from recoup.errors import InvalidInput

_NORMAL = NormalDist()
POWER = 0.80  # the power the "invoices still needed" figure is computed for


def check_confidence(confidence: float) -> float:
    if not isinstance(confidence, float | int) or not 0.5 <= confidence < 1:
        raise InvalidInput("confidence", confidence, "expected a number in [0.5, 1), e.g. 0.95")
    return float(confidence)


def z_two_sided(confidence: float) -> float:
    """The normal quantile z with P(|Z| ≤ z) = `confidence` (1.959964 for 0.95)."""
    return _NORMAL.inv_cdf(1 - (1 - check_confidence(confidence)) / 2)


@dataclass(frozen=True, kw_only=True)
class Interval:
    low: float
    high: float


def wilson(successes: int, trials: int, confidence: float = 0.95) -> Interval:
    """The Wilson score interval of a binomial proportion (Wilson 1927).

    Unlike p ± z·√(p(1−p)/n) it stays inside [0, 1] and is not empty at p = 0 or 1; with no
    trials it is the whole of [0, 1] (nothing is known).
    """
    if trials < 0 or not 0 <= successes <= trials:
        raise InvalidInput("successes", (successes, trials), "expected 0 ≤ successes ≤ trials")
    if trials == 0:
        return Interval(low=0.0, high=1.0)
    z = z_two_sided(confidence)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    # Clamp the float noise at the ends (p = 0 gives a low of ~1e-17, not 0).
    return Interval(low=max(0.0, min(p, centre - half)), high=min(1.0, max(p, centre + half)))


def two_proportion_p_value(x1: int, n1: int, x2: int, n2: int) -> float | None:
    """The two-sided p-value of the pooled two-proportion z-test of x1/n1 against x2/n2;
    None when an arm is empty or the pooled rate is 0 or 1 (no variance: nothing to test)."""
    if n1 == 0 or n2 == 0:
        return None
    pooled = (x1 + x2) / (n1 + n2)
    variance = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    if variance == 0:
        return None
    z = (x2 / n2 - x1 / n1) / math.sqrt(variance)
    return 2 * (1 - _NORMAL.cdf(abs(z)))


def needed_per_arm(p1: float, p2: float, confidence: float, power: float = POWER) -> int | None:
    """Finished invoices each arm needs for a two-sided test at `confidence` to detect the
    difference p2 − p1 with probability `power` (Fleiss, without continuity correction):

        n = (z_{1−α/2}·√(2·p̄(1−p̄)) + z_{power}·√(p1(1−p1) + p2(1−p2)))² / (p1 − p2)²,
        p̄ = (p1 + p2) / 2, α = 1 − confidence.

    None when p1 = p2: no sample size detects a difference of zero.
    """
    if p1 == p2:
        return None
    z_alpha = z_two_sided(confidence)
    z_beta = _NORMAL.inv_cdf(power)
    mean = (p1 + p2) / 2
    root = z_alpha * math.sqrt(2 * mean * (1 - mean)) + z_beta * math.sqrt(
        p1 * (1 - p1) + p2 * (1 - p2)
    )
    return math.ceil(root * root / ((p1 - p2) ** 2))


__all__ = [
    "POWER",
    "Interval",
    "check_confidence",
    "needed_per_arm",
    "two_proportion_p_value",
    "wilson",
    "z_two_sided",
]
