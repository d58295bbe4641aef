"""The retry planner: one failed charge + a policy + the card's attempt history → a Decision.

Pure: the failure instant is the only time it knows (no clock), and it reads nothing but the
decline taxonomy shipped with the package. The plan is made at the failure and assumes each
planned attempt fails too, so attempt k counts its gap from attempt k−1 (see `landing` for
where an attempt lands).

Per attempt k = 1…count, where count is the policy's number of gaps, lowered by the decline's
cap:

1. date = one gap after the reference date of the failure that precedes it;
2. instant = the local window start + the attempt's jitter on that date, in the customer's zone
   (a wall time in a DST gap moves forward by the gap; in a fold, the earlier instant);
3. while the instant is less than the minimum gap (the policy's, or the advice code's "not
   before") after the preceding failure, in a blackout of the failure's gateway, or over a
   card-network limit, the date moves to the next business day;
   With `paydays` in the policy and an insufficient-funds decline, the attempt lands instead
   on the first payday on or after that date (a business day) that no rule of this step
   holds back, before the maximum duration and the next renewal; when there is none, it
   lands as steps 1–3 say (`policy_paydays`);
4. an instant after the maximum duration (counted from the failure), or at or after the next
   renewal, drops this attempt and every later one.

A soft decline with no attempt left is a `NoRetry` that says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import assert_never
from zoneinfo import ZoneInfo

from recoup.dunning.jitter import attempt_jitters
from recoup.dunning.landing import customer_calendar, landing_date, reference_date, window_wall_time
from recoup.dunning.limits import CardAttempt, limit_reason
from recoup.dunning.outcomes import AwaitCustomer, Decision, NoRetry, PlannedAttempt, Retry
from recoup.dunning.policy import Blackout, DunningPolicy
from recoup.dunning.policy_paydays import PaydayRule, is_insufficient_funds, paydays_from
from recoup.dunning.taxonomy import (
    Classification,
    DeclineClass,
    Taxonomy,
    classify,
    default_taxonomy,
)
from recoup.timekeeping.calendar import BusinessCalendar
from recoup.timekeeping.instants import require_aware, require_in_range
from recoup.timekeeping.zones import resolve_local, to_local, zone

# A delayed attempt moves at least a day at a time and stops once past the maximum duration
# (at most 366 days), so this bound is never reached; it only guards against a loop.
_MAX_MOVES = 400


@dataclass(frozen=True, kw_only=True)
class Failure:
    """A failed charge, as the gateway reported it.

    `failed_at` must be timezone-aware; `timezone` is the customer's IANA zone and `country` its
    ISO 3166-1 alpha-2 code (holidays). `card` is the card fingerprint and `network` its brand
    (`visa`, `mastercard`, …), both needed for card-network limits; `amount` is in minor units.
    `next_renewal_at`, when known, bounds the plan (policy `stop_before_renewal`).
    """

    invoice: str
    failed_at: datetime
    timezone: str
    country: str | None = None
    subdivision: str | None = None
    decline_code: str | None = None
    advice_codes: tuple[str, ...] = ()
    card: str | None = None
    network: str | None = None
    gateway: str | None = None
    merchant_id: str | None = None
    amount: int | None = None
    next_renewal_at: datetime | None = None

    def __post_init__(self) -> None:
        # Bounded (years 1970–9000 UTC) so that the retries planned from it stay inside what
        # `datetime` represents; outside, `InvalidInput` naming `failed_at`, not an overflow.
        require_in_range("failed_at", require_aware("failed_at", self.failed_at))
        if self.next_renewal_at is not None:
            require_aware("next_renewal_at", self.next_renewal_at)


def own_failure(failure: Failure, history: Sequence[CardAttempt]) -> list[CardAttempt]:
    """The failure itself counts as an attempt on the card unless history already holds it
    (the card-network limits count it; the adaptive planner counts it the same way)."""
    if not failure.card:
        return []
    at = failure.failed_at.astimezone(UTC)
    if any(h.invoice == failure.invoice and h.at == at for h in history):
        return []
    return [
        CardAttempt(
            card=failure.card,
            at=at,
            invoice=failure.invoice,
            merchant_id=failure.merchant_id,
            amount=failure.amount,
            reattempt=False,
        )
    ]


@dataclass(frozen=True, kw_only=True)
class _Guards:
    """What may hold an attempt back from an instant (step 3): the minimum gap after the
    preceding failure, a blackout of the failure's gateway, a card-network limit."""

    failure: Failure
    verdict: Classification
    table: Taxonomy
    policy: DunningPolicy
    after: datetime  # the preceding failure + the minimum gap
    min_gap: timedelta
    blackouts: tuple[Blackout, ...]
    history: Sequence[CardAttempt]

    def held_back(self, at: datetime) -> str | None:
        """Why an attempt may not be at `at`, or None when it may."""
        if at < self.after:
            return f"minimum gap of {self.min_gap.total_seconds() / 3600:g} h"
        if any(b.start <= at < b.end for b in self.blackouts):
            return f"gateway {self.failure.gateway} blackout"
        return limit_reason(
            network=self.failure.network,
            visa_category=self.verdict.visa_category,
            visa_limited=self.table.visa_limited_categories,
            limits=self.policy.networks,
            card=self.failure.card,
            merchant_id=self.failure.merchant_id,
            amount=self.failure.amount,
            candidate=at,
            history=self.history,
        )


def _payday_landing(
    day: date,
    rules: tuple[PaydayRule, ...],
    calendar: BusinessCalendar,
    tz: ZoneInfo,
    policy: DunningPolicy,
    jitter: int,
    guards: _Guards,
    deadline: datetime,
    renewal: datetime | None,
) -> tuple[date, datetime] | None:
    """The first payday on or after `day` (a business day) whose window instant nothing holds
    back, before the maximum duration and the next renewal; None when no payday is reachable
    (the attempt then lands as the gaps say)."""
    last = to_local(deadline, tz).date()
    for payday in paydays_from(day, last, rules, calendar):
        if not calendar.is_business_day(payday):
            continue
        at = resolve_local(window_wall_time(payday, policy, jitter), tz)
        if at > deadline or (renewal is not None and at >= renewal):
            return None
        if guards.held_back(at) is None:
            return payday, at
    return None


def plan_retries(
    failure: Failure,
    policy: DunningPolicy,
    *,
    history: Sequence[CardAttempt] = (),
    taxonomy: Taxonomy | None = None,
) -> Decision:
    """Decide whether and when to retry `failure` under `policy` (rules in the module
    docstring). `history` holds the card's other attempts, made or planned, for any invoice."""
    table = taxonomy or default_taxonomy()
    verdict = classify(failure.decline_code, failure.advice_codes, taxonomy=table)
    final = policy.final_action
    match verdict.decline_class:
        case DeclineClass.NEVER | DeclineClass.NOT_APPLICABLE:
            return NoRetry(invoice=failure.invoice, reason=verdict.reason, after_last_failure=final)
        case DeclineClass.CUSTOMER_ACTION:
            return AwaitCustomer(
                invoice=failure.invoice, reason=verdict.reason, after_last_failure=final
            )
        case DeclineClass.SOFT:
            pass
        case _:
            assert_never(verdict.decline_class)

    tz = zone(failure.timezone)
    calendar = customer_calendar(policy, failure.country, failure.subdivision)
    count = len(policy.gaps)
    if verdict.max_attempts is not None:
        count = min(count, verdict.max_attempts)
    jitters = attempt_jitters(
        failure.invoice, policy.fingerprint, count, policy.jitter_span_seconds
    )
    failed_at = failure.failed_at.astimezone(UTC)
    deadline = failed_at + timedelta(seconds=policy.max_duration_seconds)
    renewal = failure.next_renewal_at if policy.stop_before_renewal else None
    min_gap = timedelta(seconds=max(policy.min_gap_seconds, verdict.min_delay_hours * 3600))
    blackouts = policy.blackouts_for(failure.gateway)
    card_history = [*history, *own_failure(failure, history)]
    payday_rules: tuple[PaydayRule, ...] = ()
    if policy.paydays is not None and is_insufficient_funds(failure.decline_code):
        payday_rules = policy.paydays.rules_for(failure.country or policy.default_country)

    notes: list[str] = []
    attempts: list[PlannedAttempt] = []
    ref_instant = failed_at
    ref_day = reference_date(to_local(failed_at, tz), policy)
    for k in range(1, count + 1):
        day = landing_date(ref_day, policy.gaps[k - 1], calendar)
        moved: str | None = None
        guards = _Guards(
            failure=failure,
            verdict=verdict,
            table=table,
            policy=policy,
            after=ref_instant + min_gap,
            min_gap=min_gap,
            blackouts=blackouts,
            history=card_history,
        )
        on_payday = _payday_landing(
            day, payday_rules, calendar, tz, policy, jitters[k - 1], guards, deadline, renewal
        )
        if on_payday is not None:
            if on_payday[0] != day:
                notes.append(f"attempt {k} moved to the payday {on_payday[0].isoformat()}")
            day, at = on_payday
        else:
            at = resolve_local(window_wall_time(day, policy, jitters[k - 1]), tz)
        for _ in range(_MAX_MOVES):
            if at > deadline:
                break
            why = guards.held_back(at)
            if why is None:
                break
            moved = moved or why
            day = calendar.next_business_day(day)
            at = resolve_local(window_wall_time(day, policy, jitters[k - 1]), tz)
        if at > deadline:
            notes.append(
                f"attempt {k}{'+' if k < count else ''} dropped: after the maximum duration "
                f"({policy.max_duration_days} days)"
                + (f", delayed by the {moved}" if moved else "")
            )
            break
        if renewal is not None and at >= renewal:
            notes.append(
                f"attempt {k}{'+' if k < count else ''} dropped: at or after the next renewal"
            )
            break
        if moved:
            notes.append(f"attempt {k} delayed to {day.isoformat()} by the {moved}")
        local = to_local(at, tz)
        attempts.append(PlannedAttempt(invoice=failure.invoice, attempt=k, at=at, local=local))
        card_history.append(
            CardAttempt(
                card=failure.card or "",
                at=at,
                invoice=failure.invoice,
                merchant_id=failure.merchant_id,
                amount=failure.amount,
            )
        )
        ref_instant = at
        ref_day = reference_date(local, policy)

    reason = "; ".join([verdict.reason, *notes])
    if not attempts:
        return NoRetry(invoice=failure.invoice, reason=reason, after_last_failure=final)
    summary = f"{len(attempts)} {'retry' if len(attempts) == 1 else 'retries'} ({policy.name})"
    return Retry(
        invoice=failure.invoice,
        attempts=tuple(attempts),
        reason=f"{reason}; {summary}",
        after_last_failure=final,
    )


def plan_after_update(
    failure: Failure, policy: DunningPolicy, *, updated_at: datetime, attempt: int = 1
) -> Retry:
    """The sequel of `AwaitCustomer`: once the customer has a new or corrected payment method
    (or has authenticated) at `updated_at`, retry once, promptly: at `updated_at` itself, or at
    the end of a blackout of the failure's gateway that covers it. `attempt` numbers the retry
    (its idempotency key), 1 unless earlier retries of the invoice were made."""
    require_aware("updated_at", updated_at)
    tz = zone(failure.timezone)
    at = updated_at.astimezone(UTC)
    for blackout in sorted(policy.blackouts_for(failure.gateway), key=lambda b: b.start):
        if blackout.start <= at < blackout.end:
            at = blackout.end
    planned = PlannedAttempt(
        invoice=failure.invoice, attempt=attempt, at=at, local=to_local(at, tz)
    )
    return Retry(
        invoice=failure.invoice,
        attempts=(planned,),
        reason="payment method updated: one prompt retry",
        after_last_failure=policy.final_action,
    )


__all__ = ["Failure", "own_failure", "plan_after_update", "plan_retries"]
