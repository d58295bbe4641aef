"""The moves a lifecycle transition is made of: the invoice being changed (`Builder`), and
scheduling, cancelling, recovering, exhausting and applying a planner decision, which the
rules in `lifecycle` combine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, assert_never

from recoup.dunning.invoice import (
    AttemptRecord,
    AttemptState,
    Invoice,
    InvoiceEvent,
    InvoiceState,
    attempt_job_id,
    event_id,
)
from recoup.dunning.messages import (
    CancelAttempt,
    Command,
    ScheduleAttempt,
    ScheduleDeadline,
    Transition,
)
from recoup.dunning.outcomes import AwaitCustomer, Decision, NoRetry, PlannedAttempt, Retry
from recoup.dunning.planner import Failure
from recoup.timekeeping.instants import format_utc


class Builder:
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
                timing=p.timing,
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


def attempt_summary(records: Sequence[AttemptRecord]) -> list[dict[str, Any]]:
    return [{"attempt": a.attempt, "at": format_utc(a.at)} for a in records]


def policy_attempts_made(attempts: Sequence[AttemptRecord]) -> int:
    """Attempts that count against the policy's gaps: every one not cancelled."""
    return sum(1 for a in attempts if a.state is not AttemptState.CANCELLED)


def decide(
    b: Builder,
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
                exhaust(b, at, reason=f"{decision.reason}; no attempt left in the policy")
                return
            numbers = b.schedule(planned, b.next_number())
            b.changes["state"] = InvoiceState.RETRYING
            b.event(
                "invoice.retry_scheduled",
                at,
                attempts=attempt_summary([b.attempts[n] for n in numbers]),
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
                decline_code=latest_codes(b)[0],
                respond_by=format_utc(max(deadline, at)),
            )
        case NoRetry():
            if prompt:
                b.schedule(prompt, b.next_number())
                b.changes["state"] = InvoiceState.RETRYING
                return
            exhaust(b, at, reason=decision.reason)
        case _:
            assert_never(decision)


def exhaust(b: Builder, at: datetime, *, reason: str) -> None:
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


def recovered_reason(attempt: int) -> str:
    """An invoice's reason once an attempt recovered it: which one, so nobody has to look it up."""
    return f"recovered by attempt {attempt}"


def recover(b: Builder, at: datetime, *, by: str, attempt: int | None) -> None:
    cancelled = b.cancel_open()
    b.changes["state"] = InvoiceState.RECOVERED
    b.changes["recovered_by"] = by
    b.changes["reason"] = recovered_reason(attempt) if attempt is not None else f"recovered: {by}"
    b.event(
        "invoice.recovered",
        at,
        by=by,
        attempt=attempt,
        amount=b.invoice.amount,
        currency=b.invoice.currency,
        cancelled_attempts=cancelled,
    )


def stop(b: Builder, at: datetime, *, reason: str) -> None:
    """Dunning ends without a payment: every open attempt is cancelled (one whose request
    already went out is still heard: see `lifecycle`), and nothing is planned again."""
    cancelled = b.cancel_open()
    b.changes["state"] = InvoiceState.CANCELLED
    b.changes["reason"] = f"dunning stopped: {reason}"
    b.event(
        "invoice.dunning_cancelled",
        at,
        reason=reason,
        amount=b.invoice.amount,
        currency=b.invoice.currency,
        cancelled_attempts=cancelled,
    )


def latest_codes(b: Builder) -> tuple[str | None, str | None]:
    """The decline and advice code of the latest failed attempt, else of the failure."""
    failed = [a for a in b.attempts.values() if a.state is AttemptState.FAILED]
    if failed:
        last = max(failed, key=lambda a: (a.reported_at or a.at, a.attempt))
        return last.decline_code, last.advice_code
    return b.invoice.decline_code, b.invoice.advice_code


def failure_at(inv: Invoice, at: datetime, codes: tuple[str | None, str | None]) -> Failure:
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


__all__ = [
    "Builder",
    "attempt_summary",
    "decide",
    "exhaust",
    "failure_at",
    "latest_codes",
    "policy_attempts_made",
    "recover",
    "recovered_reason",
]
