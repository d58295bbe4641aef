"""The invoice lifecycle: a pure state machine. Messages in; the new invoice, the events it
adds and the commands for the scheduler out. No I/O, no clock: every message carries its
instant, and the planner (`learned_planning.plan_failure`: `plan_retries`, or the adaptive
planner for an adaptive policy) is called with the card history and the learner's state the
caller read.

    open_invoice(opening, decision)        → Transition (the first state)
    transition(invoice, message, planning) → Transition | None (None: nothing changes)

Rules, in the order `transition` applies them:

- A message about an attempt that already has a final outcome changes nothing (duplicates and
  late copies), except a success reported for an attempt that was cancelled: the charge
  happened after all. If the invoice was recovered by the charge endpoint's `already_handled`
  and no attempt is credited yet, it is the charge the endpoint had seen (the endpoint charges
  an invoice only while it is open, under its lock): the attempt is credited with the recovery
  (`note.recovery_credited`). Otherwise it is a double charge (`invoice.double_charged`).
- `succeeded` → recovered; every open attempt is cancelled. `already_handled` on an open
  attempt means the charge side holds the invoice as paid another way → recovered as well.
  `closed` means the charge side closed it without a payment (voided, written off,
  cancelled) → cancelled, which is not a recovery.
- A stop (`DunningStopped`: the subscription was cancelled, the invoice voided or written
  off, an operator's stop) → cancelled from retrying or awaiting the customer; open attempts
  are cancelled and nothing is planned again. A success that still arrives for an attempt
  whose request was in flight is recorded and raised as `invoice.charged_after_stop` (the
  merchant decides whether to refund it).
- `pending` (ambiguous provider answer) and `awaiting_report` (202) keep the attempt open.
- `failed` → the attempt failed; a decline or advice code other than the one the plan was
  made with re-plans the attempts still scheduled (a hard decline stops, one that needs the
  customer waits for them, an advice code may delay); with no open attempt left → exhausted.
  `errored` (the endpoint refused the request) is not a decline: only the last one exhausts.
- Paid out of band → recovered from any state but recovered; open attempts are cancelled.
- A payment-method update → one prompt attempt (awaiting the customer or exhausted), or a
  re-plan from the update (retrying): a prompt attempt, then the policy's gaps.
- The deadline of an invoice awaiting its customer (failure + the policy's maximum duration)
  → exhausted.

Attempt numbers are never reused: a re-plan numbers its attempts after the highest so far, so
every attempt keeps its own idempotency keys. The number of attempts that follow the policy's
gaps is bounded by the number of gaps; each prompt attempt after a customer update is extra.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, assert_never

from recoup.dunning.invoice import (
    AttemptRecord,
    AttemptState,
    Invoice,
    InvoiceState,
)
from recoup.dunning.learned_planning import plan_failure, prompt_timing
from recoup.dunning.lifecycle_steps import (
    Builder,
    attempt_summary,
    decide,
    exhaust,
    failure_at,
    latest_codes,
    policy_attempts_made,
    recover,
    recovered_reason,
    stop,
)
from recoup.dunning.messages import (
    REPORTED_OUTCOMES,
    AttemptReported,
    CancelAttempt,
    Command,
    DeadlinePassed,
    DunningStopped,
    Message,
    Opening,
    PaidOutOfBand,
    PaymentMethodUpdated,
    Planning,
    ReportedOutcome,
    ScheduleAttempt,
    ScheduleDeadline,
    Transition,
)
from recoup.dunning.outcomes import AwaitCustomer, Decision, NoRetry, Retry
from recoup.dunning.planner import plan_after_update
from recoup.dunning.policy import DunningPolicy
from recoup.errors import NotFound
from recoup.timekeeping.instants import format_utc


def open_invoice(
    opening: Opening, decision: Decision, *, now: datetime
) -> tuple[Invoice, Transition]:
    """The invoice a failure opens, planned by `decision` (from `plan_retries`)."""
    failure = opening.failure
    invoice = Invoice(
        tenant=opening.tenant,
        invoice_id=failure.invoice_id,
        customer_id=failure.customer_id,
        amount=failure.amount,
        currency=failure.currency,
        failed_at=failure.failed_at,
        timezone=failure.timezone,
        country=failure.country,
        decline_code=failure.decline_code,
        advice_code=failure.advice_code,
        card_fingerprint=failure.card_fingerprint,
        card_network=failure.card_network,
        gateway=failure.gateway,
        merchant_id=failure.merchant_id,
        charge_url=opening.charge_url,
        policy=opening.policy.name,
        state=InvoiceState.RETRYING,
        decision=_kind(decision),
        reason=decision.reason,
        final_action=decision.after_last_failure.value,
        attempts=(),
        created_at=now,
        updated_at=now,
        version=-1,  # `build` makes the first stored version 0
    )
    b = Builder(invoice, seq=0, now=now, max_duration=_duration(opening.policy))
    decide(b, decision, at=now, budget=len(opening.policy.gaps))
    t = b.build()
    return t.invoice, t


def _duration(policy: DunningPolicy) -> timedelta:
    return timedelta(seconds=policy.max_duration_seconds)


def _kind(decision: Decision) -> str:
    match decision:
        case Retry():
            return "retry"
        case NoRetry():
            return "no_retry"
        case AwaitCustomer():
            return "await_customer"
        case _:
            assert_never(decision)


def transition(
    invoice: Invoice,
    message: Message,
    planning: Planning,
    *,
    seq: int,
    now: datetime,
) -> Transition | None:
    """The invoice after `message` (rules in the module docstring); None when nothing
    changes. `seq` is the number of events the invoice has (new events follow it). An attempt
    the invoice never had → `NotFound`."""
    b = Builder(invoice, seq=seq, now=now, max_duration=_duration(planning.policy))
    match message:
        case AttemptReported():
            changed = _on_attempt(b, message, planning)
        case PaidOutOfBand():
            changed = invoice.state is not InvoiceState.RECOVERED
            if changed:
                recover(b, message.at, by="paid_out_of_band", attempt=None)
        case PaymentMethodUpdated():
            changed = _on_update(b, message, planning)
        case DeadlinePassed():
            changed = invoice.state is InvoiceState.AWAITING_CUSTOMER
            if changed:
                exhaust(b, message.at, reason="no new payment method before the deadline")
        case DunningStopped():
            changed = not invoice.state.is_final
            if changed:
                stop(b, message.at, reason=message.reason)
        case _:
            assert_never(message)
    return b.build() if changed else None


def _on_attempt(b: Builder, msg: AttemptReported, planning: Planning) -> bool:
    inv = b.invoice
    record = b.attempts.get(msg.attempt)
    if record is None:
        raise NotFound(f"invoice {inv.invoice_id!r} has no attempt {msg.attempt}")
    n = msg.attempt
    if not record.state.is_open:
        if msg.outcome == "succeeded" and record.state is AttemptState.CANCELLED:
            # The attempt was cancelled (paid meanwhile, recovered by another attempt) while
            # its request was in flight, and the charge went through. Recorded once: the
            # attempt is now `succeeded`.
            _late_success(b, record, msg.at)
            return True
        return False
    match msg.outcome:
        case "pending" | "awaiting_report":
            state = AttemptState(msg.outcome)
            if record.state is state:
                return False
            b.set_attempt(replace(record, state=state))
            b.event(f"note.attempt_{msg.outcome}", msg.at, attempt=n)
            return True
        case "succeeded":
            if inv.state in (InvoiceState.RECOVERED, InvoiceState.CANCELLED):  # while it ran
                _late_success(b, record, msg.at)
                return True
            b.set_attempt(replace(record, state=AttemptState.SUCCEEDED, reported_at=msg.at))
            recover(b, msg.at, by=f"attempt:{n}", attempt=n)
            return True
        case "already_handled":
            b.set_attempt(replace(record, state=AttemptState.CANCELLED, reported_at=msg.at))
            b.event("note.already_handled", msg.at, attempt=n)
            if not inv.state.is_final:
                recover(b, msg.at, by="charge_endpoint", attempt=None)
            return True
        case "closed":
            b.set_attempt(replace(record, state=AttemptState.CANCELLED, reported_at=msg.at))
            b.event("note.closed_by_charge_side", msg.at, attempt=n, detail=msg.detail)
            if not inv.state.is_final:
                stop(b, msg.at, reason="closed without payment by the charge side")
            return True
        case "errored":
            b.set_attempt(replace(record, state=AttemptState.ERRORED, reported_at=msg.at))
            b.event("note.attempt_errored", msg.at, attempt=n, detail=msg.detail)
            if inv.state is InvoiceState.RETRYING and not b.open_attempts():
                exhaust(b, msg.at, reason=f"attempt {n} was refused by the charge endpoint")
            return True
        case "failed":
            return _on_failed(b, record, msg, planning)
        case _:
            assert_never(msg.outcome)


def _late_success(b: Builder, record: AttemptRecord, at: datetime) -> None:
    """A success for an invoice already recovered: the charge the endpoint's `already_handled`
    stood for (credited), or a second charge."""
    inv = b.invoice
    if inv.state is InvoiceState.CANCELLED:
        _charged_anyway(b, record, at, "invoice.charged_after_stop")
        return
    credited = any(a.state is AttemptState.SUCCEEDED for a in b.attempts.values())
    if inv.recovered_by != "charge_endpoint" or credited:
        _double_charged(b, record, at)
        return
    b.set_attempt(replace(record, state=AttemptState.SUCCEEDED, reported_at=at))
    b.changes["recovered_by"] = f"attempt:{record.attempt}"
    b.changes["reason"] = recovered_reason(record.attempt)
    b.event("note.recovery_credited", at, attempt=record.attempt)


def _double_charged(b: Builder, record: AttemptRecord, at: datetime) -> None:
    """A charge that landed for an invoice already recovered: the merchant must refund it."""
    _charged_anyway(b, record, at, "invoice.double_charged", recovered_by=b.invoice.recovered_by)


def _charged_anyway(
    b: Builder, record: AttemptRecord, at: datetime, event: str, **data: str | None
) -> None:
    """A charge that landed after its invoice no longer wanted one (recovered otherwise, or
    stopped): recorded on its attempt and raised as `event`, for the merchant to refund."""
    b.set_attempt(replace(record, state=AttemptState.SUCCEEDED, reported_at=at))
    inv = b.invoice
    b.event(event, at, attempt=record.attempt, **data, amount=inv.amount, currency=inv.currency)


def _on_failed(b: Builder, record: AttemptRecord, msg: AttemptReported, planning: Planning) -> bool:
    inv = b.invoice
    before = latest_codes(b)
    b.set_attempt(
        replace(
            record,
            state=AttemptState.FAILED,
            decline_code=msg.decline_code,
            advice_code=msg.advice_code,
            reported_at=msg.at,
        )
    )
    if inv.state.is_final:
        return True  # a late failure of an attempt cancelled meanwhile: logged, no effect
    codes = (msg.decline_code, msg.advice_code)
    if codes != before:
        # A new decline or advice code: what was planned no longer holds. Plan again from
        # this failure, within what the policy's gaps have left.
        b.cancel_open(scheduled_only=True)
        decision = plan_failure(
            failure_at(inv, msg.at, codes),
            planning.policy,
            history=planning.history,
            learning=planning.learning,
        )
        budget = len(planning.policy.gaps) - policy_attempts_made(list(b.attempts.values()))
        # The failure's event comes before what the re-plan adds, but says what it decided.
        index = _retry_failed_event(b, record.attempt, msg)
        decide(b, decision, at=msg.at, budget=budget)
        failed = b.events[index]
        now_known = _retry_failed_data(b, record.attempt, msg)
        b.events[index] = replace(failed, data={**failed.data, **now_known})
        return True
    _retry_failed_event(b, record.attempt, msg)
    if inv.state is InvoiceState.RETRYING and not b.open_attempts():
        exhaust(b, msg.at, reason=f"attempt {record.attempt} failed and was the last")
    return True


def _retry_failed_event(b: Builder, n: int, msg: AttemptReported) -> int:
    """Add `invoice.retry_failed`, the dunning-email hook (what failed, what comes next), as
    things stand now; return its index in the builder's events."""
    b.event("invoice.retry_failed", msg.at, **_retry_failed_data(b, n, msg))
    return len(b.events) - 1


def _retry_failed_data(b: Builder, n: int, msg: AttemptReported) -> dict[str, Any]:
    left = b.open_attempts()
    return {
        "attempt": n,
        "decline_code": msg.decline_code,
        "advice_code": msg.advice_code,
        "attempts_left": len(left),
        "next_attempt_at": format_utc(left[0].at) if left else None,
        "final_action": b.invoice.final_action,
        "access_will_pause": not left and b.invoice.final_action == "pause_access",
    }


def _on_update(b: Builder, msg: PaymentMethodUpdated, planning: Planning) -> bool:
    inv = b.invoice
    if inv.state in (InvoiceState.RECOVERED, InvoiceState.CANCELLED):
        return False  # a stopped invoice is never charged again, whatever the card
    failure = failure_at(inv, msg.at, latest_codes(b))
    prompt = plan_after_update(failure, planning.policy, updated_at=msg.at).attempts
    if planning.learning is not None:
        prompt = prompt_timing(prompt, planning.policy, inv.country)
    b.event("note.payment_method_updated", msg.at)
    if inv.state is InvoiceState.RETRYING:
        # Re-plan: a prompt attempt on the new card, then the policy's gaps from it.
        b.cancel_open(scheduled_only=True)
        rest = plan_failure(
            replace(failure, failed_at=prompt[0].at, decline_code=None, advice_codes=()),
            planning.policy,
            history=planning.history,
            learning=planning.learning,
        )
        budget = len(planning.policy.gaps) - policy_attempts_made(list(b.attempts.values()))
        if isinstance(rest, Retry):
            decide(b, rest, at=msg.at, budget=budget - 1, prompt=prompt)
        else:
            decide(b, rest, at=msg.at, budget=0, prompt=prompt)
        return True
    # Awaiting the customer, or exhausted: one prompt attempt on the new payment method.
    b.changes["reason"] = "payment method updated: one prompt retry"
    numbers = b.schedule(prompt, b.next_number())
    b.changes["state"] = InvoiceState.RETRYING
    b.event(
        "invoice.retry_scheduled",
        msg.at,
        attempts=attempt_summary([b.attempts[n] for n in numbers]),
        reason="payment method updated: one prompt retry",
    )
    return True


__all__ = [
    "REPORTED_OUTCOMES",
    "AttemptReported",
    "CancelAttempt",
    "Command",
    "DeadlinePassed",
    "DunningStopped",
    "Message",
    "Opening",
    "PaidOutOfBand",
    "PaymentMethodUpdated",
    "Planning",
    "ReportedOutcome",
    "ScheduleAttempt",
    "ScheduleDeadline",
    "Transition",
    "open_invoice",
    "transition",
]
