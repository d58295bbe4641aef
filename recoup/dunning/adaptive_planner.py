"""The adaptive planner: the static plan, each attempt moved to its learned slot only where
every guardrail of the policy holds.

1. The static plan is `plan_retries(failure, policy, history=…)`. A policy without
   `strategy = "adaptive"`, a hard decline (never retried), one that awaits the customer, or a
   plan with no attempt is returned as it is: learning never adds an attempt.
2. For attempt k of the static plan, the candidates are its own static instant and, on each
   business day of the customer's calendar within `shift_days` of its local date, each hour
   band inside the adaptive hours, at the band's start + a deterministic jitter (the planner's
   jitter hash, within the band).
3. A candidate is allowed only when it is after the attempt before it (as chosen) by at least
   the minimum gap (the policy's, or the advice code's "not before"), before the static
   attempt k+1 by the same gap (so the static plan's later attempts stay possible), outside
   the gateway's blackouts, within the card-network limits (`limits.limit_reason`, counting
   the card's history and this plan's attempts), not after the maximum duration, before the
   next renewal, and, unless it is the static instant itself, on a business day and inside
   the adaptive hours as read in the customer's zone.
4. `adaptive.choose_slot` picks among the allowed candidates (the static one wins a cold
   start). No allowed candidate (the earlier moves crowded a network limit) drops this attempt
   and the later ones, as the static planner drops them.

The result is reproducible from the log (the `LearnerState`) and the seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from recoup.dunning.adaptive import Candidate, SlotDecision, choose_slot
from recoup.dunning.adaptive_counts import LearnerState
from recoup.dunning.adaptive_slots import Context, slot_of
from recoup.dunning.jitter import attempt_jitters
from recoup.dunning.landing import customer_calendar
from recoup.dunning.limits import CardAttempt, limit_reason
from recoup.dunning.outcomes import Decision, PlannedAttempt, Retry
from recoup.dunning.planner import Failure, own_failure, plan_retries
from recoup.dunning.policy import DunningPolicy
from recoup.dunning.policy_adaptive import AdaptiveSettings
from recoup.dunning.taxonomy import Classification, Taxonomy, classify, default_taxonomy
from recoup.timekeeping.calendar import BusinessCalendar
from recoup.timekeeping.zones import resolve_local, to_local, zone


@dataclass(frozen=True, kw_only=True)
class AdaptivePlan:
    """The plan, and for each of its attempts (in order) the slot decision that placed it;
    `choices` is empty when the static plan stands untouched (static policy, no retry)."""

    decision: Decision
    choices: tuple[SlotDecision, ...] = ()


def context_for(failure: Failure, attempt: int, verdict: Classification) -> Context:
    """The learner's context of attempt `attempt` of `failure`."""
    region = failure.country or failure.timezone.split("/", 1)[0]
    return Context(
        decline_class=verdict.decline_class.value,
        decline_code=(failure.decline_code or "").strip().lower(),
        region=region.upper(),
        network=(failure.network or "").lower(),
        attempt=attempt,
    )


@dataclass(frozen=True, kw_only=True)
class _Guard:
    """The rules of step 3 for one failure."""

    failure: Failure
    policy: DunningPolicy
    settings: AdaptiveSettings
    verdict: Classification
    taxonomy: Taxonomy
    calendar: BusinessCalendar
    min_gap: timedelta
    deadline: datetime
    renewal: datetime | None

    def allows(
        self,
        candidate: Candidate,
        *,
        after: datetime,
        before: datetime | None,
        card_history: Sequence[CardAttempt],
    ) -> bool:
        at = candidate.at
        if at < after + self.min_gap or at <= after:
            return False
        if before is not None and (at + self.min_gap > before or at >= before):
            return False
        if at > self.deadline or (self.renewal is not None and at >= self.renewal):
            return False
        if any(b.start <= at < b.end for b in self.policy.blackouts_for(self.failure.gateway)):
            return False
        if not candidate.static and not self.in_hours(at):
            return False
        reason = limit_reason(
            network=self.failure.network,
            visa_category=self.verdict.visa_category,
            visa_limited=self.taxonomy.visa_limited_categories,
            limits=self.policy.networks,
            card=self.failure.card,
            merchant_id=self.failure.merchant_id,
            amount=self.failure.amount,
            candidate=at,
            history=card_history,
        )
        return reason is None

    def in_hours(self, at: datetime) -> bool:
        """On a business day, inside the adaptive hours, as read in the customer's zone."""
        local = to_local(at, self.failure.timezone)
        minute = local.hour * 60 + local.minute
        return self.calendar.is_business_day(local.date()) and (
            self.settings.hours_start <= minute < self.settings.hours_end
        )


def _candidates(
    failure: Failure,
    policy: DunningPolicy,
    settings: AdaptiveSettings,
    calendar: BusinessCalendar,
    static: PlannedAttempt,
) -> list[Candidate]:
    tz = zone(failure.timezone)
    span = settings.band_minutes * 60 - 1  # seconds: the jitter stays inside the band
    jitter = attempt_jitters(failure.invoice, policy.fingerprint, static.attempt, span)[-1]
    own = slot_of(static.local, settings.band_minutes, failure.country)
    found = [Candidate(slot=own, at=static.at, static=True)]
    home = static.local.date()
    for shift in range(-settings.shift_days, settings.shift_days + 1):
        day: date = home + timedelta(days=shift)
        if not calendar.is_business_day(day):
            continue
        for band in settings.bands:
            wall = datetime(day.year, day.month, day.day) + timedelta(seconds=band * 60 + jitter)
            at = resolve_local(wall, tz)
            slot = slot_of(to_local(at, tz), settings.band_minutes, failure.country)
            if slot != own:  # the static slot is the static instant's, never a second one
                found.append(Candidate(slot=slot, at=at))
    return found


def plan_adaptive(
    failure: Failure,
    policy: DunningPolicy,
    state: LearnerState,
    *,
    seed: int,
    history: Sequence[CardAttempt] = (),
    taxonomy: Taxonomy | None = None,
) -> AdaptivePlan:
    """The adaptive plan of `failure` (rules in the module docstring)."""
    static = plan_retries(failure, policy, history=history, taxonomy=taxonomy)
    settings = policy.adaptive
    if settings is None or not isinstance(static, Retry):
        return AdaptivePlan(decision=static)
    table = taxonomy or default_taxonomy()
    verdict = classify(failure.decline_code, failure.advice_codes, taxonomy=table)
    failed_at = failure.failed_at.astimezone(UTC)
    calendar = customer_calendar(policy, failure.country, failure.subdivision)
    guard = _Guard(
        failure=failure,
        policy=policy,
        settings=settings,
        verdict=verdict,
        taxonomy=table,
        calendar=calendar,
        min_gap=timedelta(seconds=max(policy.min_gap_seconds, verdict.min_delay_hours * 3600)),
        deadline=failed_at + timedelta(seconds=policy.max_duration_seconds),
        renewal=failure.next_renewal_at if policy.stop_before_renewal else None,
    )
    card_history = [*history, *own_failure(failure, history)]
    tz = zone(failure.timezone)
    attempts: list[PlannedAttempt] = []
    choices: list[SlotDecision] = []
    after = failed_at
    planned = static.attempts
    for k, fixed in enumerate(planned):
        before = planned[k + 1].at if k + 1 < len(planned) else None
        allowed = [
            c
            for c in _candidates(failure, policy, settings, calendar, fixed)
            if guard.allows(c, after=after, before=before, card_history=card_history)
        ]
        if not allowed:
            break
        choice = choose_slot(
            state,
            context_for(failure, fixed.attempt, verdict),
            allowed,
            settings,
            rng_seed=seed,
            invoice=failure.invoice,
        )
        attempts.append(
            PlannedAttempt(
                invoice=failure.invoice,
                attempt=fixed.attempt,
                at=choice.at,
                local=to_local(choice.at, tz),
            )
        )
        choices.append(choice)
        card_history.append(
            CardAttempt(
                card=failure.card or "",
                at=choice.at,
                invoice=failure.invoice,
                merchant_id=failure.merchant_id,
                amount=failure.amount,
            )
        )
        after = choice.at
    if not attempts:
        return AdaptivePlan(decision=static)
    moved = sum(not c.static for c in choices)
    dropped = len(planned) - len(attempts)
    note = f"adaptive: {moved} of {len(attempts)} moved to learned slots" + (
        f", {dropped} dropped (no allowed slot)" if dropped else ""
    )
    return AdaptivePlan(
        decision=Retry(
            invoice=static.invoice,
            attempts=tuple(attempts),
            reason=f"{static.reason}; {note}",
            after_last_failure=static.after_last_failure,
        ),
        choices=tuple(choices),
    )


__all__ = ["AdaptivePlan", "context_for", "plan_adaptive"]
