"""Request and response models of /v1/dunning's failures, invoices, outcomes and timelines,
and of /v1/clock (strict, as in `schemas`; customers: `wire.customers`, settings:
`wire.dunning_settings`)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from recoup.dunning.invoice import (
    INVOICE_ID_PATTERN,
    INVOICE_ID_RULE,
    AttemptState,
    Invoice,
    InvoiceEvent,
    InvoiceState,
)
from recoup.dunning.messages import STOP_REASON_MAX
from recoup.jobs.model import Run
from recoup.recovery.contacts import EMAIL_PATTERN, LOCALE_PATTERN, NAME_PATTERN
from recoup.recovery.email_store import Email
from recoup.recovery.records import FailureReport, Timeline
from recoup.wire.schemas.codes import Country, Currency, TimeZone
from recoup.wire.schemas.common import (
    Instant,
    Integer,
    Number,
    OutboundUrl,
    StrictModel,
    Text,
)
from recoup.wire.schemas.stated import Stated, one_of
from recoup.wire.timing import AttemptTimingOut

Id = Field(min_length=1, max_length=100)


def _invoice_id(value: str) -> str:
    if not _INVOICE_ID.fullmatch(value):
        raise ValueError(INVOICE_ID_RULE)
    return value


_INVOICE_ID = re.compile(INVOICE_ID_PATTERN)


# Checked by `recovery.contacts` (as the record is made), stated here.
CustomerEmail = Annotated[Text, Stated(pattern=EMAIL_PATTERN)]
CustomerName = Annotated[Text, Stated(pattern=NAME_PATTERN)]
Locale = Annotated[Text, Stated(pattern=LOCALE_PATTERN)]

# Minor units: an integer, as the document's `integer` means it.
Amount = Integer
Code = Field(default=None, min_length=1, max_length=100)


class CardIn(StrictModel):
    fingerprint: Text | None = Field(default=None, min_length=1, max_length=200)
    network: Text | None = Field(
        default=None, min_length=1, max_length=40, description="visa, mastercard, amex, …"
    )


# An invoice's id: the alphabet every entrance holds it to
# (`recoup.dunning.invoice.INVOICE_ID_RULE`), stated in the document.
InvoiceId = Annotated[str, AfterValidator(_invoice_id), Stated(pattern=INVOICE_ID_PATTERN)]


class FailureIn(StrictModel):
    invoice_id: InvoiceId = Field(min_length=1, max_length=100, description=INVOICE_ID_RULE)
    customer_id: Text = Id
    amount: Amount = Field(gt=0, le=10**15, description="Integer minor units (cents).")
    currency: Currency = Field(description="ISO 4217, e.g. usd.")
    failed_at: Instant
    timezone: TimeZone = Field(description="The customer's IANA zone.")
    country: Country | None = Field(default=None, description="ISO 3166-1 alpha-2 (holidays).")
    decline_code: Text | None = Code
    advice_code: Text | None = Code
    card: CardIn | None = None
    gateway: Text | None = Code
    merchant_id: Text | None = Field(default=None, min_length=1, max_length=200)
    charge_url: OutboundUrl | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="The retry-charge endpoint; default: the tenant's (PUT /v1/dunning/settings).",
    )
    customer_email: CustomerEmail | None = Field(
        default=None,
        min_length=3,
        max_length=254,
        description="Where Recoup writes to the customer (stored on the customer; left out: "
        "kept). One address, no display name.",
    )
    customer_name: CustomerName | None = Field(default=None, min_length=1, max_length=200)
    locale: Locale | None = Field(
        default=None,
        min_length=2,
        max_length=35,
        description="The customer's language, BCP 47 or babel style (`de-DE`, `en_US`); "
        "stored babel's way (`de_DE`).",
    )

    def to_report(self) -> FailureReport:
        """The one conversion of a failure on its way in: the report is checked and its
        codes written in their one form as it is made (`dunning.failure.ChargeFailure`)."""
        card = self.card or CardIn()
        return FailureReport(
            invoice_id=self.invoice_id,
            customer_id=self.customer_id,
            amount=self.amount,
            currency=self.currency,
            failed_at=self.failed_at,
            timezone=self.timezone,
            country=self.country,
            decline_code=self.decline_code,
            advice_code=self.advice_code,
            card_fingerprint=card.fingerprint,
            card_network=card.network,
            gateway=self.gateway,
            merchant_id=self.merchant_id,
            charge_url=self.charge_url,
            customer_email=self.customer_email,
            customer_name=self.customer_name,
            locale=self.locale,
        )


class OutcomeIn(StrictModel):
    outcome: Literal["succeeded", "failed", "already_handled", "closed", "pending"]
    decline_code: Text | None = Code
    advice_code: Text | None = Code


class InvoiceCancelIn(StrictModel):
    reason: Text = Field(
        min_length=1,
        max_length=STOP_REASON_MAX,
        description="Why dunning stops (`subscription_cancelled`, `refunded`, …): stored in the "
        "timeline and sent in `invoice.dunning_cancelled`.",
    )


class AttemptOut(BaseModel):
    attempt: int
    at: datetime
    job_id: str
    state: AttemptState


class InvoiceOut(BaseModel):
    invoice_id: str
    state: InvoiceState
    decision: Literal["retry", "no_retry", "await_customer"]
    reason: str
    attempts: list[AttemptOut]
    customer_id: str
    amount: int
    currency: str
    final_action: str
    recovered_by: str | None
    failed_at: datetime
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, invoice: Invoice) -> InvoiceOut:
        return cls(
            invoice_id=invoice.invoice_id,
            state=invoice.state,
            decision=invoice.decision,  # type: ignore[arg-type]
            reason=invoice.reason,
            attempts=[
                AttemptOut(attempt=a.attempt, at=a.at, job_id=a.job_id, state=a.state)
                for a in invoice.attempts
            ],
            customer_id=invoice.customer_id,
            amount=invoice.amount,
            currency=invoice.currency,
            final_action=invoice.final_action,
            recovered_by=invoice.recovered_by,
            failed_at=invoice.failed_at,
            created_at=invoice.created_at,
            updated_at=invoice.updated_at,
        )


class InvoicePageOut(BaseModel):
    invoices: list[InvoiceOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class RunBrief(BaseModel):
    attempt: int
    started_at: datetime
    finished_at: datetime
    outcome: str
    status_code: int | None
    error: str | None
    response_excerpt: str | None

    @classmethod
    def of(cls, run: Run) -> RunBrief:
        return cls(
            attempt=run.attempt,
            started_at=run.started_at,
            finished_at=run.finished_at,
            outcome=run.outcome.value,
            status_code=run.status_code,
            error=run.error,
            response_excerpt=run.response_excerpt,
        )


class TimelineAttemptOut(AttemptOut):
    decline_code: str | None
    advice_code: str | None
    reported_at: datetime | None
    runs_url: str = Field(description="The run log of the attempt's job.")
    runs: list[RunBrief] = Field(description="Each time the job asked the charge endpoint.")
    timing: AttemptTimingOut | None = Field(
        default=None,
        description="How an adaptive policy placed the attempt (null under a static policy).",
    )


class EventOut(BaseModel):
    id: str
    seq: int
    type: str
    at: datetime
    data: dict[str, Any]

    @classmethod
    def of(cls, event: InvoiceEvent) -> EventOut:
        return cls(id=event.id, seq=event.seq, type=event.type, at=event.at, data=event.data)


class TimelineEmailOut(BaseModel):
    """One email of the invoice, from the email ledger, with its job's run log."""

    key: str = Field(description="The message key: its job, its ledger row, its Message-ID.")
    kind: str
    state: str = Field(description="planned, sending, sent, suppressed, failed or cancelled.")
    send_at: datetime = Field(description="When it goes out (inside the local daytime).")
    recipient: str | None
    message_id: str | None
    smtp_reply: str | None = Field(description="The server's reply, or why nothing was sent.")
    tries: int = Field(description="Times the message was handed to an SMTP server.")
    sent_at: datetime | None
    job_id: str | None
    runs_url: str | None
    runs: list[RunBrief]

    @classmethod
    def of(cls, email: Email, runs: list[Run]) -> TimelineEmailOut:
        return cls(
            key=email.key,
            kind=email.kind,
            state=email.state.value,
            send_at=email.send_at,
            recipient=email.recipient,
            message_id=email.message_id,
            smtp_reply=email.smtp_reply,
            tries=email.tries,
            sent_at=email.sent_at,
            job_id=email.job_id,
            runs_url=None if email.job_id is None else f"/v1/jobs/{email.job_id}/runs",
            runs=[RunBrief.of(r) for r in runs],
        )


class TimelineOut(InvoiceOut):
    attempts: list[TimelineAttemptOut]  # type: ignore[assignment]
    timezone: str
    decline_code: str | None
    advice_code: str | None
    charge_url: str
    policy: str
    events: list[EventOut]
    emails: list[TimelineEmailOut] = Field(
        default_factory=list, description="The invoice's emails to its customer, by send_at."
    )

    @classmethod
    def of_timeline(cls, timeline: Timeline) -> TimelineOut:
        invoice = timeline.invoice
        base = InvoiceOut.of(invoice).model_dump()
        base["attempts"] = [
            TimelineAttemptOut(
                attempt=a.attempt,
                at=a.at,
                job_id=a.job_id,
                state=a.state,
                decline_code=a.decline_code,
                advice_code=a.advice_code,
                reported_at=a.reported_at,
                runs_url=f"/v1/jobs/{a.job_id}/runs",
                runs=[RunBrief.of(r) for r in timeline.runs.get(a.attempt, [])],
                timing=AttemptTimingOut.of(a.timing),
            )
            for a in invoice.attempts
        ]
        return cls(
            **base,
            timezone=invoice.timezone,
            decline_code=invoice.decline_code,
            advice_code=invoice.advice_code,
            charge_url=invoice.charge_url,
            policy=invoice.policy,
            events=[EventOut.of(e) for e in timeline.events],
            emails=[
                TimelineEmailOut.of(e, timeline.email_runs.get(e.key, [])) for e in timeline.emails
            ],
        )


class ClockIn(StrictModel):
    """Exactly one of `advance_seconds` and `to`."""

    model_config = ConfigDict(
        json_schema_extra=one_of({"advance_seconds": "number"}, {"to": "string"})
    )
    exactly_one = (("advance_seconds", "to"),)

    advance_seconds: Number | None = Field(default=None, ge=0, le=10 * 366 * 86400)
    to: Instant | None = None


class ClockOut(BaseModel):
    now: datetime
    ran: int = Field(default=0, description="Job attempts run to catch up with the new time.")
