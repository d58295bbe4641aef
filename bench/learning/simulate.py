"""One seed × world × policy: every failure planned at its instant, every try answered by the
world, in time order, the policy's learner fed each answer as it comes.

A try succeeds when the seed's draw for (invoice, attempt number) is below the world's chance
(`success_probability`) at the try's local time. The draws are common to every policy: two
policies' tries of the same invoice's k-th attempt meet the same number, so differences
between policies are not drowned in the draws' noise (common random numbers).

Besides what happened, each invoice's *expected* recovery under its plan, 1 − Π(1 − p_k), is
kept: regret against the oracle is read from those, without the draws' noise.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bench.learning.policies import ObservedAttempt, PlannedTry, TimingPolicy
from bench.learning.population import HORIZON_START, FailureContext
from recoup.payments.world import TryHistory, World, success_probability
from recoup.timekeeping.zones import to_local, zone

WEEK = timedelta(weeks=1)


class BadPlan(Exception):
    """A policy planned tries out of order or before the failure."""


@dataclass(kw_only=True)
class RunResult:
    """What one policy did with one seed's failures in one world."""

    invoices: int = 0
    recovered: int = 0
    attempts: int = 0
    expected_by_invoice: dict[str, float] = field(default_factory=dict)
    week_of: dict[str, int] = field(default_factory=dict)  # invoice → week of its failure

    @property
    def rate(self) -> float:
        return self.recovered / self.invoices if self.invoices else 0.0


def draw(seed: int, invoice: str, attempt: int) -> float:
    """The seed's uniform number in [0, 1) for an invoice's k-th try, the same in every
    policy."""
    digest = hashlib.blake2b(f"{seed}:{invoice}:{attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest) / 2**64


def _plan_rng(seed: int, invoice: str) -> random.Random:
    digest = hashlib.blake2b(f"plan:{seed}:{invoice}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest))


def _checked(failure: FailureContext, tries: Sequence[PlannedTry]) -> list[PlannedTry]:
    previous = failure.failed_at
    for t in tries:
        if t.at.tzinfo is None or t.at <= previous:
            raise BadPlan(f"{failure.invoice}: tries must be aware and after the failure, in order")
        previous = t.at
    return list(tries)


def simulate(
    seed: int, world: World, policy: TimingPolicy, failures: Sequence[FailureContext]
) -> RunResult:
    """Run `failures` (ordered by instant) through `policy` in `world` (see the docstring)."""
    result = RunResult(invoices=len(failures))
    state = policy.initial_state()
    # Events: (instant, order, kind, payload); failures before tries at the same instant.
    events: list[tuple[datetime, int, int, object]] = []
    for n, failure in enumerate(failures):
        events.append((failure.failed_at.astimezone(UTC), n, 0, failure))
    heapq.heapify(events)
    serial = len(failures)
    recovered: set[str] = set()
    while events:
        at, _, kind, payload = heapq.heappop(events)
        if kind == 0:
            assert isinstance(payload, FailureContext)
            failure = payload
            tries = _checked(failure, policy.plan(failure, state, _plan_rng(seed, failure.invoice)))
            tz = zone(failure.failure.timezone)
            miss = 1.0
            for k, planned in enumerate(tries, start=1):
                local = to_local(planned.at, tz)
                history = TryHistory(first_failed_at=failure.failed_at, retries_before=k - 1)
                p = success_probability(world, failure.segment, local, history)
                miss *= 1.0 - p
                serial += 1
                heapq.heappush(
                    events, (planned.at.astimezone(UTC), serial, 1, (failure, k, planned, local, p))
                )
            result.expected_by_invoice[failure.invoice] = 1.0 - miss
            # Auckland's October 1st begins on September 30 in UTC: week 0 all the same.
            result.week_of[failure.invoice] = max(0, (failure.failed_at - HORIZON_START) // WEEK)
            continue
        failure, k, planned, local, p = payload  # type: ignore[misc]
        if failure.invoice in recovered:
            continue  # recovered by an earlier try: the rest are cancelled
        result.attempts += 1
        succeeded = draw(seed, failure.invoice, k) < p
        if succeeded:
            recovered.add(failure.invoice)
            result.recovered += 1
        state = policy.observe(
            state,
            ObservedAttempt(
                failure=failure, attempt=k, at=at, local=local, succeeded=succeeded, planned=planned
            ),
        )
    return result


__all__ = ["BadPlan", "RunResult", "draw", "simulate"]
