"""The learner's shell: a tenant's own attempt log read into a `LearnerState`, for the pure
adaptive planner (`dunning.learned_planning`), which takes it as an argument.

- **What is read**: every attempt of the tenant answered `succeeded` or `failed`
  (`DunningStore.learner_attempts`), as an `adaptive.AttemptRecord`: its context (the
  invoice's decline class and code, country or zone region, card network, the attempt's
  number), its local slot (the instant in the customer's zone, in the policy's band width),
  whether it succeeded, and whether it was made in the static plan's slot (no timing
  recorded, a holdout or static arm, or an adaptive decision that kept the static slot).
- **Cached per tenant and extended**: the counts stay in memory (`LearnerCounts`) with the
  answer instant read last; each planning reads only the answers from there on (minus a
  `LOOK_BACK` for answers committed a little out of order, each counted once by its key).
  A policy with another band width starts its counts again (a slot's band is part of it).
- **The seed**: a tenant's decisions draw from the seed `tenant_seed(tenant)` (SHA-256 of the
  tenant's id: nothing to store, the same in every process), so a decision is reproducible
  from the log and the tenant.
- **The holdout**: `analytics.uplift.in_holdout(tenant, customer, share)`, the policy's
  `holdout_share` (10% by default), sticky per customer.

Each process keeps its own cache; they all read the same log.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from recoup.analytics.uplift import in_holdout
from recoup.dunning.adaptive_counts import LearnerCounts, LearnerState
from recoup.dunning.adaptive_planner import context_for
from recoup.dunning.adaptive_slots import AttemptRecord, slot_of
from recoup.dunning.learned_planning import Learning, plan_failure
from recoup.dunning.limits import CardAttempt
from recoup.dunning.messages import (
    AttemptReported,
    Message,
    Opening,
    PaymentMethodUpdated,
    Planning,
)
from recoup.dunning.outcomes import Decision
from recoup.dunning.planner import Failure
from recoup.dunning.policy import DunningPolicy
from recoup.dunning.taxonomy import classify
from recoup.recovery.store import AnsweredAttempt, DunningStore
from recoup.timekeeping.zones import to_local

LOOK_BACK = timedelta(minutes=10)  # answers committed out of their instants' order
PAGE = 10_000  # answers read per statement
_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")


def tenant_seed(tenant: str) -> int:
    """The seed of a tenant's adaptive decisions (63 bits of SHA-256 of its id)."""
    digest = hashlib.sha256(f"recoup-adaptive-seed\x00{tenant}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def learned_record(answer: AnsweredAttempt, band_minutes: int) -> AttemptRecord:
    """What the learner counts of one answered attempt (module docstring)."""
    attempt = answer.attempt
    advice = (answer.advice_code,) if answer.advice_code else ()
    failure = Failure(
        invoice=answer.invoice_id,
        failed_at=attempt.at,
        timezone=answer.timezone,
        country=answer.country,
        decline_code=answer.decline_code,
        advice_codes=advice,
        network=answer.card_network,
    )
    verdict = classify(answer.decline_code, advice)
    timing = attempt.timing
    return AttemptRecord(
        context=context_for(failure, attempt.attempt, verdict),
        slot=slot_of(to_local(attempt.at, answer.timezone), band_minutes, answer.country),
        success=attempt.state.value == "succeeded",
        static=timing is None or not timing.moved,
    )


@dataclass
class _TenantLog:
    band_minutes: int
    counts: LearnerCounts = field(default_factory=LearnerCounts)
    read_to: datetime = _EPOCH  # the latest answer instant read
    recent: dict[tuple[str, int], datetime] = field(default_factory=dict)  # within LOOK_BACK
    answers: int = 0


class TenantLearners:
    """The learner states of every tenant this process plans for (module docstring)."""

    def __init__(self, store: DunningStore, *, seed_of: Callable[[str], int] = tenant_seed) -> None:
        self.store = store
        self.seed_of = seed_of  # a tenant's seed (tests give others)
        self._logs: dict[str, _TenantLog] = {}
        self._lock = threading.Lock()

    def state(self, tenant: str, band_minutes: int) -> LearnerState:
        """The tenant's counts, extended by the answers logged since the last reading (a
        snapshot: later answers do not change it)."""
        with self._lock:
            log = self._logs.get(tenant)
            if log is None or log.band_minutes != band_minutes:
                log = self._logs[tenant] = _TenantLog(band_minutes=band_minutes)
            self._extend(tenant, log)
            return log.counts.state().extended(())

    def answers(self, tenant: str) -> int:
        """How many answered attempts the tenant's counts hold (0: never read)."""
        log = self._logs.get(tenant)
        return 0 if log is None else log.answers

    def _extend(self, tenant: str, log: _TenantLog) -> None:
        since = max(_EPOCH, log.read_to - LOOK_BACK) if log.answers else _EPOCH
        while True:
            page = self.store.learner_attempts(tenant, since=since, limit=PAGE)
            fresh = 0
            for answer in page:
                key = (answer.invoice_id, answer.attempt.attempt)
                reported = answer.attempt.reported_at or answer.attempt.at
                since = max(since, reported)
                if key in log.recent:
                    continue
                log.counts.add(learned_record(answer, log.band_minutes))
                log.answers += 1
                fresh += 1
                log.recent[key] = reported
                log.read_to = max(log.read_to, reported)
            if len(page) < PAGE or not fresh:  # the end (or > PAGE answers at one instant)
                break
        horizon = log.read_to - LOOK_BACK
        log.recent = {k: at for k, at in log.recent.items() if at >= horizon}

    def learning(self, tenant: str, customer: str, policy: DunningPolicy) -> Learning | None:
        """What an adaptive decision of `policy` for `customer` needs (None: a static
        policy, planned as it always was)."""
        settings = policy.adaptive
        if settings is None:
            return None
        share = settings.holdout_share
        held = share > 0 and in_holdout(tenant, customer, share=share)
        return Learning(
            state=LearnerState() if held else self.state(tenant, settings.band_minutes),
            seed=self.seed_of(tenant),
            holdout=held,
            holdout_share=share,
        )

    def plan(self, tenant: str, opening: Opening, history: Sequence[CardAttempt]) -> Decision:
        """The first plan of a failure: `learned_planning.plan_failure` with what the tenant's
        log has taught (for an adaptive policy)."""
        learning = self.learning(tenant, opening.failure.customer_id, opening.policy)
        return plan_failure(
            opening.failure.for_planner(), opening.policy, history=history, learning=learning
        )

    def planning(
        self,
        tenant: str,
        customer: str,
        policy: DunningPolicy,
        history: Sequence[CardAttempt],
        message: Message,
    ) -> Planning:
        """What a transition on `message` needs, the learner's state included when the message
        may re-plan (a failure, a card update): the others plan nothing."""
        replans = isinstance(message, PaymentMethodUpdated) or (
            isinstance(message, AttemptReported) and message.outcome == "failed"
        )
        learning = self.learning(tenant, customer, policy) if replans else None
        return Planning(policy=policy, history=history, learning=learning)


__all__ = ["LOOK_BACK", "TenantLearners", "learned_record", "tenant_seed"]
