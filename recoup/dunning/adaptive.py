"""The learner of adaptive timing: slots, contexts, the state read from an attempt log, and the
choice of a slot by Thompson sampling.

- **Slot**: a local hour band (`band_minutes` wide, anchored at midnight) × weekday × class of
  the day of the month (`DOM_CLASSES`: a payday of the customer's country's convention, the day
  after, two days after, or another day; for a country without a convention, the days around
  the paydays of the conventions we know: 1st–3rd, 14th–17th, 24th–26th, the month's end).
- **Context**: decline class and code, country (else the zone's region), card network, attempt
  number. Counts are kept at five levels, coarse to fine (`context_levels`), so a context seen
  rarely borrows from its parents.
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

import calendar as month_calendar
import functools
import hashlib
import itertools
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from statistics import NormalDist
from types import MappingProxyType

from recoup.dunning.policy_adaptive import AdaptiveSettings, format_minutes
from recoup.dunning.policy_paydays import country_paydays, is_payday
from recoup.errors import InvalidInput
from recoup.timekeeping.calendar import BusinessCalendar

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# Classes of the day of the month: the days since a payday of the customer's country's
# convention (`policy_paydays`, the same data the payday-aware static policy uses), else, for a
# country with none, the days around the paydays of the conventions we know.
PAYDAY_CLASSES = ("payday", "payday+1", "payday+2")
CALENDAR_CLASSES = ("month_start", "mid_month", "late_month", "month_end")
DOM_CLASSES = (*PAYDAY_CLASSES, *CALENDAR_CLASSES, "other")
_DOM_LABELS = {
    "payday": "a payday",
    "payday+1": "the day after a payday",
    "payday+2": "2 days after a payday",
    "month_start": "1st–3rd",
    "mid_month": "14th–17th",
    "late_month": "24th–26th",
    "month_end": "last 3 days of the month",
    "other": "other days of the month",
}
_FACTORS = ("band", "weekday", "dom")
_TIE = 1e-12  # scores closer than this are equal


@functools.lru_cache(maxsize=64)
def _payroll_calendar(country: str) -> BusinessCalendar:
    try:
        return BusinessCalendar(country=country)
    except InvalidInput:  # a country the holidays package does not know: weekends only
        return BusinessCalendar()


@functools.lru_cache(maxsize=65_536)
def day_of_month_class(day: date, country: str | None = None) -> str:
    """The class of `day` in `DOM_CLASSES` for a customer in `country` (module comment)."""
    rules = country_paydays(country) if country else ()
    if rules and country:
        calendar = _payroll_calendar(country.strip().upper())
        for back, name in enumerate(PAYDAY_CLASSES):
            if is_payday(day - timedelta(days=back), rules, calendar):
                return name
        return "other"
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


def slot_of(local: datetime, band_minutes: int, country: str | None = None) -> Slot:
    """The slot of a local wall reading of a customer in `country`."""
    minute = local.hour * 60 + local.minute
    return Slot(
        band_start=minute - minute % band_minutes,
        band_minutes=band_minutes,
        weekday=local.weekday(),
        dom_class=day_of_month_class(local.date(), country),
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
        counts = LearnerCounts(dict(self.counts))
        for record in records:
            counts.add(record)
        return counts.state()


class LearnerCounts:
    """The counts of a `LearnerState`, kept up to date one attempt at a time (a shell that
    learns as answers come, such as the benchmark, without copying the counts each time)."""

    def __init__(self, counts: dict[CountKey, Tally] | None = None) -> None:
        self._counts: dict[CountKey, Tally] = {} if counts is None else counts

    def add(self, record: AttemptRecord) -> None:
        for level in context_levels(record.context):
            keys: list[CountKey] = [(level, "all", None)]
            keys += [(level, name, record.slot.factor(name)) for name in _FACTORS]
            if record.static:
                keys.append((level, "static", None))
            for key in keys:
                self._counts[key] = self._counts.get(key, Tally()).plus(record.success)

    def state(self) -> LearnerState:
        """A read-only view of the counts as they are now, and as they will be: `add`
        changes it (copy it with `extended(())` to keep one)."""
        return LearnerState(MappingProxyType(self._counts))


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
        (name, c.slot.factor(name)) for c in candidates for name in _FACTORS
    }  # the factors to draw
    posteriors = {
        key: posterior(
            state, context, key[0], key[1], prior=prior, strength=settings.prior_strength
        )
        for key in sorted(values, key=repr)
    }
    keys = [tuple((name, c.slot.factor(name)) for name in _FACTORS) for c in candidates]
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
    "CALENDAR_CLASSES",
    "DOM_CLASSES",
    "PAYDAY_CLASSES",
    "WEEKDAYS",
    "AttemptRecord",
    "Candidate",
    "Context",
    "LearnerCounts",
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
