"""Timing policies for the benchmark: the interface, the static ones and the oracle.

A policy is anything with

    name: str
    initial_state() -> State                                   the learner's state at start
    plan(failure, learner_state, rng) -> Sequence[PlannedTry]   at the failure's instant
    observe(learner_state, attempt) -> State                    after each attempt's answer

The simulation owns the state: it starts from `initial_state()`, passes it to every `plan`,
and replaces it by what `observe` returns for every attempt of every policy's invoices in the
order their instants come (so a plan made at t knows exactly the answers before t). `rng` is
seeded per invoice. A plan's tries must be strictly increasing and after the failure; they
stop at the first success. Static policies keep no state (None).

Only the oracle sees the world. To add a policy (the adaptive one), register a factory:
`FACTORIES["adaptive"] = lambda world: MyPolicy()`; a factory takes the world so the oracle
can be one, and every other policy must ignore it.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Protocol

from bench.learning.population import FailureContext
from recoup.demo.nightly import RETRY_DAYS
from recoup.dunning import DunningPolicy, Failure, PlannedAttempt, Retry, plan_retries, preset
from recoup.dunning.landing import customer_calendar
from recoup.dunning.policy_paydays import parse_paydays
from recoup.dunning.taxonomy import classify
from recoup.payments.world import Segment, TryHistory, World, success_probability
from recoup.timekeeping.zones import resolve_local, to_local, zone

# Where the oracle may move an attempt: the adaptive policy's defaults
# (recoup.dunning.policy_adaptive.AdaptiveSettings), so the oracle is the best the adaptive
# policy could do with a perfect estimate: business days within SHIFT_DAYS of the static
# attempt's date, one-hour bands from 08:00 to 20:00 local.
SHIFT_DAYS = 2
HOURS = range(8, 20)  # band starts, local hours


@dataclass(frozen=True, kw_only=True)
class PlannedTry:
    """One planned try: its instant (aware), and what a learning policy logs with it (the
    propensity of its choice; its decision, for an explanation)."""

    at: datetime
    propensity: float | None = None
    decision: Any = None


@dataclass(frozen=True, kw_only=True)
class ObservedAttempt:
    """One try and its answer, as the policy that planned it observes it."""

    failure: FailureContext
    attempt: int  # 1 for the first retry
    at: datetime  # UTC
    local: datetime  # in the customer's zone
    succeeded: bool
    planned: PlannedTry


class TimingPolicy(Protocol):
    name: str

    def initial_state(self) -> Any: ...

    def plan(
        self, failure: FailureContext, learner_state: Any, rng: random.Random
    ) -> Sequence[PlannedTry]: ...

    def observe(self, learner_state: Any, attempt: ObservedAttempt) -> Any: ...


class Static:
    """A Recoup policy as it is: `plan_retries`, no learning."""

    def __init__(self, name: str, policy: DunningPolicy) -> None:
        self.name, self.policy = name, policy

    def initial_state(self) -> None:
        return None

    def plan(
        self, failure: FailureContext, learner_state: Any, rng: random.Random
    ) -> list[PlannedTry]:
        return [PlannedTry(at=a.at) for a in static_plan(self.policy, failure.failure)]

    def observe(self, learner_state: Any, attempt: ObservedAttempt) -> None:
        return None


@functools.lru_cache(maxsize=200_000)
def static_plan(policy: DunningPolicy, failure: Failure) -> tuple[PlannedAttempt, ...]:
    """The static plan's attempts (cached: the same failure in three worlds plans once)."""
    decision = plan_retries(failure, policy)
    return decision.attempts if isinstance(decision, Retry) else ()


class NightlyBatch:
    """The old way (`recoup.demo.nightly`): at 00:00 UTC on fixed UTC days after the failure,
    whatever the decline (hard ones included) and whatever the customer's zone."""

    name = "nightly batch"

    def initial_state(self) -> None:
        return None

    def plan(
        self, failure: FailureContext, learner_state: Any, rng: random.Random
    ) -> list[PlannedTry]:
        day = datetime.combine(failure.failed_at.astimezone(UTC).date(), time(0), UTC)
        return [PlannedTry(at=day + timedelta(days=n)) for n in RETRY_DAYS]

    def observe(self, learner_state: Any, attempt: ObservedAttempt) -> None:
        return None


class Oracle:
    """Knows the world: for each attempt of the static plan, the allowed slot (see SHIFT_DAYS
    and HOURS) where the world's chance is highest, after the attempt before it and before
    the static attempt after it by the minimum gap, never past the maximum duration; or the
    static instant itself. Greedy, attempt by attempt, with the adaptive planner's rules
    (`recoup.dunning.adaptive_planner`): the best that policy could do knowing the world."""

    name = "oracle"

    def __init__(self, world: World, policy: DunningPolicy) -> None:
        self.world, self.policy = world, policy

    def initial_state(self) -> None:
        return None

    def observe(self, learner_state: Any, attempt: ObservedAttempt) -> None:
        return None

    def plan(
        self, failure: FailureContext, learner_state: Any, rng: random.Random
    ) -> list[PlannedTry]:
        f = failure.failure
        static = static_plan(self.policy, f)
        if not static:
            return []
        tz = zone(f.timezone)
        calendar = customer_calendar(self.policy, f.country, f.subdivision)
        verdict = classify(f.decline_code, f.advice_codes)
        gap = timedelta(seconds=max(self.policy.min_gap_seconds, verdict.min_delay_hours * 3600))
        deadline = f.failed_at + timedelta(seconds=self.policy.max_duration_seconds)
        order = _hours_by_odds(self.world, failure.segment)
        history = TryHistory(first_failed_at=f.failed_at)
        chosen: list[PlannedTry] = []
        after = f.failed_at
        for k, fixed in enumerate(static):
            before = static[k + 1].at if k + 1 < len(static) else None
            best: tuple[float, datetime] | None = None
            home = fixed.local.date()
            for shift in range(-SHIFT_DAYS, SHIFT_DAYS + 1):
                day: date = home + timedelta(days=shift)
                if not calendar.is_business_day(day):
                    continue
                for hour in order:  # the first allowed band of the day is its best
                    at = resolve_local(datetime.combine(day, time(hour)), tz)
                    if at <= after or at < after + gap or at > deadline:
                        continue
                    if before is not None and (at >= before or at + gap > before):
                        continue
                    p = success_probability(
                        self.world,
                        failure.segment,
                        to_local(at, tz),
                        dataclasses.replace(history, retries_before=k),
                    )
                    if best is None or p > best[0]:
                        best = (p, at)
                    break
            # The static instant itself is always allowed, as for the adaptive policy.
            p_static = success_probability(
                self.world,
                failure.segment,
                fixed.local,
                dataclasses.replace(history, retries_before=k),
            )
            if fixed.at > after and (best is None or p_static >= best[0]):
                best = (p_static, fixed.at)
            if best is None:
                break
            chosen.append(PlannedTry(at=best[1]))
            after = best[1]
        return chosen


@functools.lru_cache(maxsize=4096)
def _hours_by_odds(world: World, segment: Segment) -> tuple[int, ...]:
    """The oracle's bands, best first, for `segment`: the hour effect is the same every day
    in the model (odds multiply), so one reference day orders them."""
    tz = zone("UTC")
    noon_day = datetime(2026, 10, 7, tzinfo=tz)  # a Wednesday, no payday in any convention
    history = TryHistory(first_failed_at=noon_day)
    chance = {
        h: success_probability(world, segment, noon_day.replace(hour=h), history) for h in HOURS
    }
    return tuple(sorted(HOURS, key=lambda h: (-chance[h], h)))


def payday_aware() -> DunningPolicy:
    """The default preset with `paydays = "country"` (policy_paydays)."""
    base = preset("business-days")
    return dataclasses.replace(base, name="business-days-paydays", paydays=parse_paydays("country"))


Factory = Callable[[World], TimingPolicy]

FACTORIES: dict[str, Factory] = {
    "static default": lambda world: Static("static default", preset("business-days")),
    "payday-aware": lambda world: Static("payday-aware", payday_aware()),
    "nightly batch": lambda world: NightlyBatch(),
    "oracle": lambda world: Oracle(world, preset("business-days")),
}

__all__ = [
    "FACTORIES",
    "HOURS",
    "SHIFT_DAYS",
    "NightlyBatch",
    "ObservedAttempt",
    "Oracle",
    "PlannedTry",
    "Static",
    "TimingPolicy",
    "payday_aware",
    "static_plan",
]
