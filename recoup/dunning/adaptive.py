"""The learner of adaptive timing: a slot factor's posterior and the choice of a slot by
Thompson sampling, over the slots and contexts of `adaptive_slots.py` (what a slot and a
context are) and the counts of `adaptive_counts.py` (the state read from an attempt log).

- **Model**: a slot's success rate is read as the context's rate times three lifts, its
  band's, its weekday's and its day-of-month class's (rate of the factor's value ÷ rate of the
  context), each factor's rate a Beta posterior. At each level a value's prior is the lift of
  the level above times this level's rate, weighing `prior_strength` attempts, so a context
  with a lower base rate (a later attempt) still inherits its parents' lifts; at the root every
  value's prior is the rate of the static policy's own slot (no slot is believed better than
  the static one before the log says so). A level counts only the attempts of its other
  branches, so no attempt is counted twice. Factoring lets 12 bands + 7 weekdays + 8 classes
  be learned where their 672 combinations could not. Known limit: a factor's lift is read off
  its margin, so a weekday on which later attempts cluster looks worse than it is.
- **Choice** (`choose_slot`): one Thompson draw of every factor; the candidate with the largest
  product wins. The best estimate is the static slot unless a candidate beats it with
  posterior probability `move_confidence` (a normal approximation on the log of the ratio of
  their products, the factors they share cancelling out); then the best such candidate.
  Exploration is bounded: a Thompson winner other than the best estimate is kept only with
  probability `exploration`, so at most that share of decisions leave the best estimate.
  Before `min_attempts` attempts of the decline class are logged (a cold start) the static
  slot is kept.
- **Propensity**: the probability that this procedure picks the chosen slot, estimated by
  running it again `propensity_draws` times on a random stream of its own (seeded from the
  same seed, invoice and attempt): (hits + 1) / (draws + 1), counting the decision's own draw,
  so it is never 0 (inverse-propensity estimates divide by it). Reproducible to the bit.

Pure: the state is an argument, every random draw comes from a `random.Random` seeded by
SHA-256 of (seed, invoice, attempt, purpose); no clock, no I/O.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import NormalDist

from recoup.dunning.adaptive_counts import LearnerState, Tally
from recoup.dunning.adaptive_slots import (
    DOM_LABELS,
    FACTORS,
    WEEKDAYS,
    Context,
    Slot,
    context_levels,
)
from recoup.dunning.policy_adaptive import AdaptiveSettings
from recoup.errors import InvalidInput

_TIE = 1e-12  # scores closer than this are equal


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A slot an attempt may take, with the instant it would land at."""

    slot: Slot
    at: datetime
    static: bool = False


@dataclass(frozen=True, kw_only=True)
class Posterior:
    """A factor's Beta(alpha, beta) posterior and the attempts it saw at the finest level."""

    alpha: float
    beta: float
    attempts: int
    successes: int

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def sd(self) -> float:
        total = self.alpha + self.beta
        return math.sqrt(self.alpha * self.beta / (total * total * (total + 1)))


@dataclass(frozen=True, kw_only=True)
class SlotDecision:
    """The slot chosen for one attempt, the probability the procedure had of choosing it, and
    why, in words. `explored`: chosen by exploration rather than as the best estimate."""

    slot: Slot
    at: datetime
    propensity: float
    explanation: str
    static: bool
    explored: bool = False
    estimate: float | None = None  # the chosen slot's estimated success rate
    static_estimate: float | None = None


def _laplace(t: Tally) -> float:
    return (t.successes + 1) / (t.attempts + 2)


def root_prior(state: LearnerState, context: Context) -> float:
    """The prior mean of every factor at the root: the success rate of the static policy's
    slot in the decline class (Laplace-smoothed), else of all its attempts."""
    root = context_levels(context)[0]
    static = state.tally((root, "static", None))
    return _laplace(static if static.attempts else state.tally((root, "all", None)))


def _clip(p: float) -> float:
    return min(1 - 1e-6, max(1e-6, p))


def posterior(
    state: LearnerState,
    context: Context,
    name: str,
    value: int | str | None,
    *,
    prior: float,
    strength: float,
) -> Posterior:
    """The factor value's posterior at the context's finest level (rules in the module
    docstring); `name` "all" gives the context's own rate.

    Each attempt is counted once: a level contributes only the attempts of its other branches
    (its count less the next finer level's), so a value seen a few times in one fine context
    is not counted again at every level above it."""
    levels = context_levels(context)

    def disjoint(key_name: str, key_value: int | str | None) -> list[Tally]:
        tallies = [state.tally((level, key_name, key_value)) for level in levels]
        return [
            Tally(t.successes - finer.successes, t.attempts - finer.attempts)
            for t, finer in itertools.pairwise(tallies)
        ] + [tallies[-1]]

    overall = disjoint("all", None)
    own = overall if name == "all" else disjoint(name, value)
    rate = prior  # the rate of the branch, shrunk toward the branch above
    lift = 1.0  # of the value, against the branch's rate
    alpha = beta = 0.0
    for branch, mine in zip(overall, own, strict=True):
        rate = _clip((branch.successes + strength * rate) / (branch.attempts + strength))
        mean = _clip(lift * rate)
        alpha = strength * mean + mine.successes
        beta = strength * (1 - mean) + mine.attempts - mine.successes
        lift = alpha / (alpha + beta) / rate
    last = own[-1]
    return Posterior(alpha=alpha, beta=beta, attempts=last.attempts, successes=last.successes)


def _stream(seed: int, invoice: str, attempt: int, purpose: str) -> random.Random:
    digest = hashlib.sha256()
    for part in (str(seed), invoice, str(attempt), purpose):
        data = part.encode()
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return random.Random(int.from_bytes(digest.digest()[:16], "big"))


def _percent(p: float) -> str:
    return f"{100 * p:.0f}%"


def _best(
    scores: Sequence[float],
    index: Sequence[tuple[int, ...]],
    relative: Sequence[float],
    static: int | None,
    settings: AdaptiveSettings,
) -> int:
    """The best estimate: the candidate of the largest score among those better than the
    static slot with probability `move_confidence`, else the static slot; without a static
    candidate, the largest score. "Better" is read on the log of the ratio of the scores,
    whose variance (the delta method) sums the relative variances of the factors in which the
    two slots differ: a factor they share cancels out."""
    if static is None:
        return max(range(len(scores)), key=scores.__getitem__)
    z = NormalDist().inv_cdf(settings.move_confidence)
    base = index[static]

    def convincing(c: int) -> bool:
        if scores[c] <= scores[static] * (1 + _TIE):
            return False
        variance = sum(
            relative[i] + relative[j] for i, j in zip(index[c], base, strict=True) if i != j
        )
        return math.log(scores[c] / scores[static]) > z * math.sqrt(variance)

    moves = [c for c in range(len(scores)) if convincing(c)]
    return max(moves, key=scores.__getitem__) if moves else static


def choose_slot(
    state: LearnerState,
    context: Context,
    candidates: Sequence[Candidate],
    settings: AdaptiveSettings,
    *,
    rng_seed: int,
    invoice: str,
) -> SlotDecision:
    """The slot of one attempt among `candidates` (those the guardrails allow; the static one
    among them when it is allowed), by the rules in the module docstring."""
    if not candidates:
        raise InvalidInput("candidates", [], "expected at least one allowed slot")
    static = next((c for c in candidates if c.static), None)
    fallback = static or candidates[0]
    logged = state.tally((context_levels(context)[0], "all", None)).attempts
    if logged < settings.min_attempts:
        return SlotDecision(
            slot=fallback.slot,
            at=fallback.at,
            propensity=1.0,
            static=fallback.static,
            explanation=(
                f"{fallback.slot.label}: the static slot (cold start: {logged} attempts "
                f"logged for {context.decline_class} declines, {settings.min_attempts} needed)"
            ),
        )

    prior = root_prior(state, context)
    values = {
        (name, c.slot.factor(name)) for c in candidates for name in FACTORS
    }  # the factors to draw
    posteriors = {
        key: posterior(
            state, context, key[0], key[1], prior=prior, strength=settings.prior_strength
        )
        for key in sorted(values, key=repr)
    }
    keys = [tuple((name, c.slot.factor(name)) for name in FACTORS) for c in candidates]
    order = list(posteriors)
    position = {k: i for i, k in enumerate(order)}
    index = [tuple(position[k] for k in ks) for ks in keys]
    params = [(posteriors[k].alpha, posteriors[k].beta) for k in order]
    means = [a / (a + b) for a, b in params]
    scores = [means[i] * means[j] * means[m] for i, j, m in index]
    # The delta method: the relative variances of independent factors add up.
    relative = [(posteriors[k].sd / posteriors[k].mean) ** 2 for k in order]
    best = _best(scores, index, relative, candidates.index(static) if static else None, settings)

    def pick(rng: random.Random) -> int:
        draw = [rng.betavariate(a, b) for a, b in params]
        sampled = [draw[i] * draw[j] * draw[m] for i, j, m in index]
        winner = max(range(len(sampled)), key=sampled.__getitem__)
        if winner != best and rng.random() >= settings.exploration:
            winner = best
        return winner

    chosen = pick(_stream(rng_seed, invoice, context.attempt, "choose"))
    rng = _stream(rng_seed, invoice, context.attempt, "propensity")
    hits = sum(pick(rng) == chosen for _ in range(settings.propensity_draws))
    propensity = (hits + 1) / (settings.propensity_draws + 1)

    overall = posterior(state, context, "all", None, prior=prior, strength=settings.prior_strength)
    scale = overall.mean ** (len(FACTORS) - 1)  # three factor rates hold the base rate thrice

    def estimate(i: int) -> float:
        return min(1.0, scores[i] / scale)

    chosen_slot = candidates[chosen].slot
    parts = []
    for name in FACTORS:
        p = posteriors[(name, chosen_slot.factor(name))]
        what = {
            "band": chosen_slot.band_label,
            "weekday": WEEKDAYS[chosen_slot.weekday],
            "dom": DOM_LABELS[chosen_slot.dom_class],
        }[name]
        parts.append(f"{what} {_percent(p.mean)} over {p.attempts} attempts")
    # The delta method: the relative variances of independent factors add up.
    spread = estimate(chosen) * math.sqrt(sum(relative[i] for i in index[chosen]))
    against = (
        f"against {_percent(estimate(candidates.index(static)))} for the static slot "
        f"{static.slot.label}"
        if static is not None
        else "the static slot is not allowed here"
    )
    how = (
        "explored" if chosen != best else "best estimate"
    ) + f", chosen with probability {propensity:.2f}"
    explanation = (
        f"{chosen_slot.label}: {_percent(estimate(chosen))} ± {_percent(spread)} "
        f"({'; '.join(parts)}), {against}; {how}"
    )
    return SlotDecision(
        slot=chosen_slot,
        at=candidates[chosen].at,
        propensity=propensity,
        explanation=explanation,
        static=candidates[chosen].static,
        explored=chosen != best,
        estimate=estimate(chosen),
        static_estimate=estimate(candidates.index(static)) if static is not None else None,
    )


__all__ = [
    "Candidate",
    "Posterior",
    "SlotDecision",
    "choose_slot",
    "posterior",
    "root_prior",
]
