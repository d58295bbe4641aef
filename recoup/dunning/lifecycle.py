"""The invoice lifecycle: a pure state machine. Messages in; the new invoice, the events it
adds and the commands for the scheduler out. No I/O, no clock: every message carries its
instant, and the planner (`plan_retries`) is called with the card history the caller read.

    open_invoice(opening, decision)        → Transition (the first state)
    transition(invoice, message, planning) → Transition | None (None: nothing changes)

Rules, in the order `transition` applies them:

- A message about an attempt that already has a final outcome changes nothing (duplicates and
  late copies), except a success reported for an attempt that was cancelled: the charge
  happened after all, so it is recorded as a double charge (`invoice.double_charged`).
- `succeeded` → recovered; every open attempt is cancelled. `already_handled` on an open
  attempt means the charge side holds the invoice as settled → recovered as well.
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

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal, assert_never

from recoup.dunning.invoice import (
    AttemptRecord,
    AttemptState,
    Invoice,
    InvoiceEvent,
    InvoiceState,
    attempt_job_id,
    event_id,
)
from recoup.dunning.limits import CardAttempt
from recoup.dunning.outcomes import AwaitCustomer, Decision, NoRetry, PlannedAttempt, Retry
from recoup.dunning.planner import Failure, plan_after_update, plan_retries
from recoup.dunning.policy import DunningPolicy
from recoup.errors import InvalidInput, NotFound
from recoup.timekeeping.instants import format_utc, require_aware

ReportedOutcome = Literal[
    "succeeded", "failed", "already_handled", "pending", "awaiting_report", "errored"
]
REPORTED_OUTCOMES: tuple[ReportedOutcome, ...] = (
    "succeeded",
    "failed",
    "already_handled",
    "pending",
    "awaiting_report",
    "errored",
)


# -- messages in ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AttemptReported:
    """What the charge endpoint answered for attempt `attempt` (or what was reported later)."""

    attempt: int
    outcome: ReportedOutcome
    at: datetime  # when the answer arrived
    decline_code: str | None = None
    advice_code: str | None = None
    detail: str | None = None  # for `errored`: what the endpoint said

    def __post_init__(self) -> None:
        require_aware("at", self.at)
        if self.outcome not in REPORTED_OUTCOMES:
            raise InvalidInput("outcome", self.outcome, f"expected one of {REPORTED_OUTCOMES}")


@dataclass(frozen=True, kw_only=True)
class PaidOutOfBand:
    at: datetime

    def __post_init__(self) -> None:
        require_aware("at", self.at)


@dataclass(frozen=True, kw_only=True)
class PaymentMethodUpdated:
    at: datetime

    def __post_init__(self) -> None:
        require_aware("at", self.at)


@dataclass(frozen=True, kw_only=True)
class DeadlinePassed:
    """The invoice's deadline job ran: an invoice still awaiting its customer is exhausted."""

    at: datetime

    def __post_init__(self) -> None:
        require_aware("at", self.at)


Message = AttemptReported | PaidOutOfBand | PaymentMethodUpdated | DeadlinePassed


# -- commands out --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ScheduleAttempt:
    attempt: AttemptRecord


@dataclass(frozen=True, kw_only=True)
class CancelAttempt:
    attempt: AttemptRecord


@dataclass(frozen=True, kw_only=True)
class ScheduleDeadline:
    """Run the invoice's deadline check at `at` (the customer has until then)."""

    at: datetime


Command = ScheduleAttempt | CancelAttempt | ScheduleDeadline


@dataclass(frozen=True, kw_only=True)
class Transition:
    invoice: Invoice
    events: tuple[InvoiceEvent, ...]
    commands: tuple[Command, ...]


@dataclass(frozen=True, kw_only=True)
class Planning:
    """What a re-plan needs besides the invoice: the policy it was planned with and the card's
    other attempts (network limits)."""

    policy: DunningPolicy
    history: Sequence[CardAttempt] = ()


@dataclass(frozen=True, kw_only=True)
class Opening:
    """A reported failure with everything `open_invoice` stores about it."""

    tenant: str
    invoice_id: str
    customer_id: str
    amount: int
    currency: str
    failed_at: datetime
    timezone: str
    country: str | None
    decline_code: str | None
    advice_code: str | None
    card_fingerprint: str | None
    card_network: str | None
    gateway: str | None
    merchant_id: str | None
    charge_url: str
    policy: DunningPolicy

    def failure(self) -> Failure:
        return Failure(
            invoice=self.invoice_id,
            failed_at=self.failed_at,
            timezone=self.timezone,
            country=self.country,
            decline_code=self.decline_code,
            advice_codes=(self.advice_code,) if self.advice_code else (),
            card=self.card_fingerprint,
            network=self.card_network,
            gateway=self.gateway,
            merchant_id=self.merchant_id,
            amount=self.amount,
        )


# -- the machine ---------------------------------------------------------------------------


class _Builder:
    """Accumulates one transition: the invoice's new fields, attempts, events, commands."""

    def __init__(
        self, invoice: Invoice, *, seq: int, now: datetime, max_duration: timedelta
    ) -> None:
        self.invoice = invoice
        self.max_duration = max_duration  # the policy's: how long the customer has
        self.attempts: dict[int, AttemptRecord] = {a.attempt: a for a in invoice.attempts}
        self.events: list[InvoiceEvent] = []
        self.commands: list[Command] = []
        self.changes: dict[str, Any] = {}
        self.seq = seq
        self.changed_at = now

    def event(self, type_: str, at: datetime, **data: Any) -> None:
        self.seq += 1
        inv = self.invoice
        body = {"invoice_id": inv.invoice_id, "customer_id": inv.customer_id, **data}
        self.events.append(
            InvoiceEvent(
                id=event_id(inv.tenant, inv.invoice_id, self.seq),
                tenant=inv.tenant,
                invoice_id=inv.invoice_id,
                seq=self.seq,
                type=type_,
                at=at,
                data=body,
            )
        )

    def set_attempt(self, record: AttemptRecord) -> None:
        self.attempts[record.attempt] = record

    def open_attempts(self) -> list[AttemptRecord]:
        return [a for n, a in sorted(self.attempts.items()) if a.state.is_open]

    def cancel_open(self, *, scheduled_only: bool = False) -> list[int]:
        cancelled = []
        for a in self.open_attempts():
            if scheduled_only and a.state is not AttemptState.SCHEDULED:
                continue
            gone = replace(a, state=AttemptState.CANCELLED)
            self.set_attempt(gone)
            self.commands.append(CancelAttempt(attempt=gone))
            cancelled.append(a.attempt)
        return cancelled

    def schedule(self, planned: Sequence[PlannedAttempt], first_number: int) -> list[int]:
        numbers = []
        for offset, p in enumerate(planned):
            n = first_number + offset
            record = AttemptRecord(
                attempt=n,
                at=p.at,
                state=AttemptState.SCHEDULED,
                job_id=attempt_job_id(self.invoice.tenant, self.invoice.invoice_id, n),
            )
            self.set_attempt(record)
            self.commands.append(ScheduleAttempt(attempt=record))
            numbers.append(n)
        return numbers

    def next_number(self) -> int:
        return max(self.attempts, default=0) + 1

    def build(self) -> Transition:
        invoice = replace(
            self.invoice,
            **self.changes,
            attempts=tuple(a for _, a in sorted(self.attempts.items())),
            updated_at=self.changed_at,
            version=self.invoice.version + 1,
        )
        return Transition(invoice=invoice, events=tuple(self.events), commands=tuple(self.commands))


def _attempt_summary(records: Sequence[AttemptRecord]) -> list[dict[str, Any]]:
    return [{"attempt": a.attempt, "at": format_utc(a.at)} for a in records]


def _policy_attempts_made(attempts: Sequence[AttemptRecord]) -> int:
    """Attempts that count against the policy's gaps: every one not cancelled."""
    return sum(1 for a in attempts if a.state is not AttemptState.CANCELLED)


def _decide(
    b: _Builder,
    decision: Decision,
    *,
    at: datetime,
    budget: int,
    prompt: Sequence[PlannedAttempt] = (),
) -> None:
    """Apply a planner decision to the builder: schedule (the prompt attempt, then at most
    `budget` planned ones), wait for the customer, or exhaust."""
    inv = b.invoice
    b.changes["reason"] = decision.reason
    match decision:
        case Retry():
            planned = [*prompt, *decision.attempts[: max(budget, 0)]]
            if not planned:
                _exhaust(b, at, reason=f"{decision.reason}; no attempt left in the policy")
                return
            numbers = b.schedule(planned, b.next_number())
            b.changes["state"] = InvoiceState.RETRYING
            b.event(
                "invoice.retry_scheduled",
                at,
                attempts=_attempt_summary([b.attempts[n] for n in numbers]),
                reason=decision.reason,
            )
        case AwaitCustomer():
            if prompt:
                b.schedule(prompt, b.next_number())
                b.changes["state"] = InvoiceState.RETRYING
                return
            b.changes["state"] = InvoiceState.AWAITING_CUSTOMER
            deadline = inv.failed_at + b.max_duration
            b.commands.append(ScheduleDeadline(at=max(deadline, at)))
            b.event(
                "invoice.awaiting_customer",
                at,
                reason=decision.reason,
                decline_code=_latest_codes(b)[0],
                respond_by=format_utc(max(deadline, at)),
            )
        case NoRetry():
            if prompt:
                b.schedule(prompt, b.next_number())
                b.changes["state"] = InvoiceState.RETRYING
                return
            _exhaust(b, at, reason=decision.reason)
        case _:
            assert_never(decision)


def _exhaust(b: _Builder, at: datetime, *, reason: str) -> None:
    b.cancel_open()
    b.changes["state"] = InvoiceState.EXHAUSTED
    b.changes["reason"] = reason
    made = sum(1 for a in b.attempts.values() if a.state is not AttemptState.CANCELLED)
    b.event(
        "invoice.exhausted",
        at,
        final_action=b.invoice.final_action,
        reason=reason,
        attempts_made=made,
        amount=b.invoice.amount,
        currency=b.invoice.currency,
    )


def _recover(b: _Builder, at: datetime, *, by: str, attempt: int | None) -> None:
    cancelled = b.cancel_open()
    b.changes["state"] = InvoiceState.RECOVERED
    b.changes["recovered_by"] = by
    b.changes["reason"] = "recovered by attempt" if attempt is not None else f"recovered: {by}"
    b.event(
        "invoice.recovered",
        at,
        by=by,
        attempt=attempt,
        amount=b.invoice.amount,
        currency=b.invoice.currency,
        cancelled_attempts=cancelled,
    )


def _latest_codes(b: _Builder) -> tuple[str | None, str | None]:
    """The decline and advice code of the latest failed attempt, else of the failure."""
    failed = [a for a in b.attempts.values() if a.state is AttemptState.FAILED]
    if failed:
        last = max(failed, key=lambda a: (a.reported_at or a.at, a.attempt))
        return last.decline_code, last.advice_code
    return b.invoice.decline_code, b.invoice.advice_code


def _failure_at(inv: Invoice, at: datetime, codes: tuple[str | None, str | None]) -> Failure:
    return Failure(
        invoice=inv.invoice_id,
        failed_at=at,
        timezone=inv.timezone,
        country=inv.country,
        decline_code=codes[0],
        advice_codes=(codes[1],) if codes[1] else (),
        card=inv.card_fingerprint,
        network=inv.card_network,
        gateway=inv.gateway,
        merchant_id=inv.merchant_id,
        amount=inv.amount,
    )


def open_invoice(
    opening: Opening, decision: Decision, *, now: datetime
) -> tuple[Invoice, Transition]:
    """The invoice a failure opens, planned by `decision` (from `plan_retries`)."""
    invoice = Invoice(
        tenant=opening.tenant,
        invoice_id=opening.invoice_id,
        customer_id=opening.customer_id,
        amount=opening.amount,
        currency=opening.currency,
        failed_at=opening.failed_at,
        timezone=opening.timezone,
        country=opening.country,
        decline_code=opening.decline_code,
        advice_code=opening.advice_code,
        card_fingerprint=opening.card_fingerprint,
        card_network=opening.card_network,
        gateway=opening.gateway,
        merchant_id=opening.merchant_id,
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
    b = _Builder(invoice, seq=0, now=now, max_duration=_duration(opening.policy))
    _decide(b, decision, at=now, budget=len(opening.policy.gaps))
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
    b = _Builder(invoice, seq=seq, now=now, max_duration=_duration(planning.policy))
    match message:
        case AttemptReported():
            changed = _on_attempt(b, message, planning)
        case PaidOutOfBand():
            changed = invoice.state is not InvoiceState.RECOVERED
            if changed:
                _recover(b, message.at, by="paid_out_of_band", attempt=None)
        case PaymentMethodUpdated():
            changed = _on_update(b, message, planning)
        case DeadlinePassed():
            changed = invoice.state is InvoiceState.AWAITING_CUSTOMER
            if changed:
                _exhaust(b, message.at, reason="no new payment method before the deadline")
        case _:
            assert_never(message)
    return b.build() if changed else None


def _on_attempt(b: _Builder, msg: AttemptReported, planning: Planning) -> bool:
    inv = b.invoice
    record = b.attempts.get(msg.attempt)
    if record is None:
        raise NotFound(f"invoice {inv.invoice_id!r} has no attempt {msg.attempt}")
    n = msg.attempt
    if not record.state.is_open:
        if msg.outcome == "succeeded" and record.state is AttemptState.CANCELLED:
            # The attempt was cancelled (paid meanwhile, recovered by another attempt) while
            # its request was in flight, and the charge went through: a double charge that the
            # merchant must refund. Recorded once: the attempt is now `succeeded`.
            b.set_attempt(replace(record, state=AttemptState.SUCCEEDED, reported_at=msg.at))
            b.event(
                "invoice.double_charged",
                msg.at,
                attempt=n,
                recovered_by=inv.recovered_by,
                amount=inv.amount,
                currency=inv.currency,
            )
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
            b.set_attempt(replace(record, state=AttemptState.SUCCEEDED, reported_at=msg.at))
            if inv.state is InvoiceState.RECOVERED:  # paid out of band while it ran
                b.event(
                    "invoice.double_charged",
                    msg.at,
                    attempt=n,
                    recovered_by=inv.recovered_by,
                    amount=inv.amount,
                    currency=inv.currency,
                )
                return True
            _recover(b, msg.at, by=f"attempt:{n}", attempt=n)
            return True
        case "already_handled":
            b.set_attempt(replace(record, state=AttemptState.CANCELLED, reported_at=msg.at))
            b.event("note.already_handled", msg.at, attempt=n)
            if not inv.state.is_final:
                _recover(b, msg.at, by="charge_endpoint", attempt=None)
            return True
        case "errored":
            b.set_attempt(replace(record, state=AttemptState.ERRORED, reported_at=msg.at))
            b.event("note.attempt_errored", msg.at, attempt=n, detail=msg.detail)
            if inv.state is InvoiceState.RETRYING and not b.open_attempts():
                _exhaust(b, msg.at, reason=f"attempt {n} was refused by the charge endpoint")
            return True
        case "failed":
            return _on_failed(b, record, msg, planning)
        case _:
            assert_never(msg.outcome)


def _on_failed(
    b: _Builder, record: AttemptRecord, msg: AttemptReported, planning: Planning
) -> bool:
    inv = b.invoice
    before = _latest_codes(b)
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
        decision = plan_retries(
            _failure_at(inv, msg.at, codes), planning.policy, history=planning.history
        )
        budget = len(planning.policy.gaps) - _policy_attempts_made(list(b.attempts.values()))
        _retry_failed_event(b, record.attempt, msg, planned_after=True)
        _decide(b, decision, at=msg.at, budget=budget)
        if b.changes.get("state") is InvoiceState.RETRYING:
            _fix_retry_failed(b)
        return True
    _retry_failed_event(b, record.attempt, msg, planned_after=False)
    if inv.state is InvoiceState.RETRYING and not b.open_attempts():
        _exhaust(b, msg.at, reason=f"attempt {record.attempt} failed and was the last")
    return True


def _retry_failed_event(b: _Builder, n: int, msg: AttemptReported, *, planned_after: bool) -> None:
    """`invoice.retry_failed`, the dunning-email hook: what failed, what comes next. After a
    re-plan its `next_attempt_at` and `attempts_left` are filled in by `_fix_retry_failed`."""
    left = b.open_attempts()
    b.event(
        "invoice.retry_failed",
        msg.at,
        attempt=n,
        decline_code=msg.decline_code,
        advice_code=msg.advice_code,
        attempts_left=len(left),
        next_attempt_at=format_utc(left[0].at) if left else None,
        final_action=b.invoice.final_action,
        access_will_pause=not left and b.invoice.final_action == "pause_access",
    )


def _fix_retry_failed(b: _Builder) -> None:
    left = b.open_attempts()
    for i, e in enumerate(b.events):
        if e.type == "invoice.retry_failed":
            data = {
                **e.data,
                "attempts_left": len(left),
                "next_attempt_at": format_utc(left[0].at) if left else None,
                "access_will_pause": False,
            }
            b.events[i] = replace(e, data=data)


def _on_update(b: _Builder, msg: PaymentMethodUpdated, planning: Planning) -> bool:
    inv = b.invoice
    if inv.state is InvoiceState.RECOVERED:
        return False
    failure = _failure_at(inv, msg.at, _latest_codes(b))
    prompt = plan_after_update(failure, planning.policy, updated_at=msg.at).attempts
    b.event("note.payment_method_updated", msg.at)
    if inv.state is InvoiceState.RETRYING:
        # Re-plan: a prompt attempt on the new card, then the policy's gaps from it.
        b.cancel_open(scheduled_only=True)
        rest = plan_retries(
            replace(failure, failed_at=prompt[0].at, decline_code=None, advice_codes=()),
            planning.policy,
            history=planning.history,
        )
        budget = len(planning.policy.gaps) - _policy_attempts_made(list(b.attempts.values()))
        if isinstance(rest, Retry):
            _decide(b, rest, at=msg.at, budget=budget - 1, prompt=prompt)
        else:
            _decide(b, rest, at=msg.at, budget=0, prompt=prompt)
        return True
    # Awaiting the customer, or exhausted: one prompt attempt on the new payment method.
    b.changes["reason"] = "payment method updated: one prompt retry"
    numbers = b.schedule(prompt, b.next_number())
    b.changes["state"] = InvoiceState.RETRYING
    b.event(
        "invoice.retry_scheduled",
        msg.at,
        attempts=_attempt_summary([b.attempts[n] for n in numbers]),
        reason="payment method updated: one prompt retry",
    )
    return True


__all__ = [
    "REPORTED_OUTCOMES",
    "AttemptReported",
    "CancelAttempt",
    "Command",
    "DeadlinePassed",
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
