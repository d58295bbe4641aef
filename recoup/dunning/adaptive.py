"""The learner of adaptive timing: slots, contexts, the state read from an attempt log, and the
choice of a slot by Thompson sampling.

- **Slot**: a local hour band (`band_minutes` wide, anchored at midnight) × weekday × class of
  the day of the month (`DOM_CLASSES`: the days around the paydays of the conventions we know,
  US 1st and 15th, JP 25th, GB/DE the month's end).
- **Context**: decline class and code, country (else the zone's region), card network, attempt
  number. Counts are kept at five levels, coarse to fine (`context_levels`), so a context seen
  rarely borrows from its parents.
- **Model**: a slot's success rate is read as the context's rate times three lifts, its
  band's, its weekday's and its day-of-month class's (rate of the factor's value ÷ rate of the
  context), each factor's rate a Beta posterior. At each level a value's prior is the lift of
  the level above times this level's rate, weighing `prior_strength` attempts, so a context
  with a lower base rate (a later attempt) still inherits its parents' lifts; at the root every
  value's prior is the rate of the static policy's own slot (no slot is believed better than
  the static one before the log says so). Factoring lets 12 bands + 7 weekdays + 5 classes be
  learned where their 420 combinations could not.
- **Choice** (`choose_slot`): one Thompson draw of every factor; the candidate with the largest
  product wins. Exploration is bounded: a winner other than the best estimate (largest product
  of posterior means, the static slot on ties) is kept only with probability `exploration`, so
  at most that share of decisions leave the best estimate. Before `min_attempts` attempts of
  the decline class are logged (a cold start) the static slot is kept.
- **Propensity**: the probability that this procedure picks the chosen slot, estimated by
  running it again `propensity_draws` times on a random stream of its own (seeded from the
  same seed, invoice and attempt): (hits + 1) / (draws + 1), counting the decision's own draw,
  so it is never 0 (inverse-propensity estimates divide by it). Reproducible to the bit.

Pure: the state is an argument, every random draw comes from a `random.Random` seeded by
SHA-256 of (seed, invoice, attempt, purpose); no clock, no I/O.
"""

from __future__ import annotations

import calendar as month_calendar
import hashlib
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from types import MappingProxyType

from recoup.dunning.policy_adaptive import AdaptiveSettings, format_minutes
from recoup.errors import InvalidInput

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# Classes of the day of the month, around the paydays of the conventions we know.
DOM_CLASSES = ("month_start", "mid_month", "late_month", "month_end", "other")
_DOM_LABELS = {
    "month_start": "1st–3rd",
    "mid_month": "14th–17th",
    "late_month": "24th–26th",
    "month_end": "last 3 days of the month",
    "other": "other days of the month",
}
_FACTORS = ("band", "weekday", "dom")
_TIE = 1e-12  # products of means closer than this are a tie, which the static slot wins


def day_of_month_class(day: date) -> str:
    """The class of `day` in `DOM_CLASSES` (the month's last 3 days first)."""
    last = month_calendar.monthrange(day.year, day.month)[1]
    if day.day > last - 3:
        return "month_end"
    if day.day <= 3:
        return "month_start"
    if 14 <= day.day <= 17:
        return "mid_month"
    if 24 <= day.day <= 26:
        return "late_month"
    return "other"


@dataclass(frozen=True, kw_only=True, order=True)
class Slot:
    """A local hour band (`band_start` minutes after midnight, `band_minutes` wide), a weekday
    (0 = Monday) and a day-of-month class."""

    band_start: int
    band_minutes: int
    weekday: int
    dom_class: str

    @property
    def band_label(self) -> str:
        return (
            f"{format_minutes(self.band_start)}–"
            f"{format_minutes(self.band_start + self.band_minutes)}"
        )

    @property
    def label(self) -> str:
        """e.g. "Thursday 18:00–19:00 (14th–17th)"."""
        return f"{WEEKDAYS[self.weekday]} {self.band_label} ({_DOM_LABELS[self.dom_class]})"

    def factor(self, name: str) -> int | str:
        match name:
            case "band":
                return self.band_start
            case "weekday":
                return self.weekday
            case _:
                return self.dom_class


def slot_of(local: datetime, band_minutes: int) -> Slot:
    """The slot of a local wall reading."""
    minute = local.hour * 60 + local.minute
    return Slot(
        band_start=minute - minute % band_minutes,
        band_minutes=band_minutes,
        weekday=local.weekday(),
        dom_class=day_of_month_class(local.date()),
    )


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a retry is made for. `region` is the customer's country, else the zone's region."""

    decline_class: str
    decline_code: str
    region: str
    network: str
    attempt: int


ContextKey = tuple[str | int, ...]


def context_levels(context: Context) -> tuple[ContextKey, ...]:
    """The context's keys, coarse to fine: class; + code; + region; + network; + attempt."""
    parts: tuple[str | int, ...] = (
        context.decline_class,
        context.decline_code,
        context.region,
        context.network,
        context.attempt,
    )
    return tuple(parts[: n + 1] for n in range(len(parts)))


@dataclass(frozen=True, kw_only=True)
class AttemptRecord:
    """One logged attempt: its context, its slot, whether it succeeded, and whether it was made
    in the static policy's slot (the prior's evidence)."""

    context: Context
    slot: Slot
    success: bool
    static: bool = False


@dataclass(frozen=True)
class Tally:
    successes: int = 0
    attempts: int = 0

    def plus(self, success: bool) -> Tally:
        return Tally(self.successes + int(success), self.attempts + 1)


# A count's key: a context key, then the factor's name and value ("all" and "static": None).
CountKey = tuple[ContextKey, str, int | str | None]


@dataclass(frozen=True)
class LearnerState:
    """Counts of attempts and successes per context level and factor value (read-only)."""

    counts: Mapping[CountKey, Tally] = field(default_factory=lambda: MappingProxyType({}))

    def tally(self, key: CountKey) -> Tally:
        return self.counts.get(key, Tally())

    def extended(self, records: Iterable[AttemptRecord]) -> LearnerState:
        """A new state with `records` counted too (this one unchanged)."""
        counts = dict(self.counts)
        for record in records:
            for level in context_levels(record.context):
                keys: list[CountKey] = [(level, "all", None)]
                keys += [(level, name, record.slot.factor(name)) for name in _FACTORS]
                if record.static:
                    keys.append((level, "static", None))
                for key in keys:
                    counts[key] = counts.get(key, Tally()).plus(record.success)
        return LearnerState(MappingProxyType(counts))


def learner_state(records: Iterable[AttemptRecord]) -> LearnerState:
    """The state of a log of attempts (a pure function of the log: the same rows in any order
    give the same state)."""
    return LearnerState().extended(records)


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
    docstring); `name` "all" gives the context's own rate."""
    rate = prior  # the level's own rate, shrunk toward its parent's
    lift = 1.0  # of the value, against the level's rate
    alpha = beta = 0.0
    tally = Tally()
    for level in context_levels(context):
        overall = state.tally((level, "all", None))
        rate = _clip((overall.successes + strength * rate) / (overall.attempts + strength))
        tally = overall if name == "all" else state.tally((level, name, value))
        mean = _clip(lift * rate)
        alpha = strength * mean + tally.successes
        beta = strength * (1 - mean) + tally.attempts - tally.successes
        lift = alpha / (alpha + beta) / rate
    return Posterior(alpha=alpha, beta=beta, attempts=tally.attempts, successes=tally.successes)


def _stream(seed: int, invoice: str, attempt: int, purpose: str) -> random.Random:
    digest = hashlib.sha256()
    for part in (str(seed), invoice, str(attempt), purpose):
        data = part.encode()
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return random.Random(int.from_bytes(digest.digest()[:16], "big"))


def _percent(p: float) -> str:
    return f"{100 * p:.0f}%"


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
        (name, c.slot.factor(name)) for c in candidates for name in _FACTORS
    }  # the factors to draw
    posteriors = {
        key: posterior(
            state, context, key[0], key[1], prior=prior, strength=settings.prior_strength
        )
        for key in sorted(values, key=repr)
    }
    keys = [tuple((name, c.slot.factor(name)) for name in _FACTORS) for c in candidates]

    def product(draw: Mapping[tuple[str, int | str], float], i: int) -> float:
        return math.prod(draw[k] for k in keys[i])

    means = {k: p.mean for k, p in posteriors.items()}
    scores = [product(means, i) for i in range(len(candidates))]
    best = max(range(len(candidates)), key=lambda i: (scores[i], -i))
    if static is not None:
        s = candidates.index(static)
        if scores[s] >= scores[best] - _TIE:
            best = s
    order = list(posteriors)

    def pick(rng: random.Random) -> int:
        draw = {k: rng.betavariate(posteriors[k].alpha, posteriors[k].beta) for k in order}
        sampled = [product(draw, i) for i in range(len(candidates))]
        winner = max(range(len(candidates)), key=lambda i: (sampled[i], -i))
        if winner != best and rng.random() >= settings.exploration:
            winner = best
        return winner

    chosen = pick(_stream(rng_seed, invoice, context.attempt, "choose"))
    rng = _stream(rng_seed, invoice, context.attempt, "propensity")
    hits = sum(pick(rng) == chosen for _ in range(settings.propensity_draws))
    propensity = (hits + 1) / (settings.propensity_draws + 1)

    overall = posterior(state, context, "all", None, prior=prior, strength=settings.prior_strength)
    scale = overall.mean ** (len(_FACTORS) - 1)  # three factor rates hold the base rate thrice

    def estimate(i: int) -> float:
        return min(1.0, scores[i] / scale)

    chosen_slot = candidates[chosen].slot
    parts = []
    for name in _FACTORS:
        p = posteriors[(name, chosen_slot.factor(name))]
        what = {
            "band": chosen_slot.band_label,
            "weekday": WEEKDAYS[chosen_slot.weekday],
            "dom": _DOM_LABELS[chosen_slot.dom_class],
        }[name]
        parts.append(f"{what} {_percent(p.mean)} over {p.attempts} attempts")
    # The delta method: the relative variances of independent factors add up.
    spread = estimate(chosen) * math.sqrt(
        sum((posteriors[k].sd / posteriors[k].mean) ** 2 for k in keys[chosen])
    )
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
    "DOM_CLASSES",
    "WEEKDAYS",
    "AttemptRecord",
    "Candidate",
    "Context",
    "LearnerState",
    "Posterior",
    "Slot",
    "SlotDecision",
    "Tally",
    "choose_slot",
    "context_levels",
    "day_of_month_class",
    "learner_state",
    "posterior",
    "root_prior",
    "slot_of",
]
