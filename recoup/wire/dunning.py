"""Request and response models of /v1/dunning and /v1/clock (strict, as in `schemas`)."""

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
from recoup.recovery.intake_store import DEFAULT_TIMEZONE, IntakeSettings
from recoup.recovery.records import FailureReport, Timeline
from recoup.recovery.store import DunningSettings
from recoup.wire.schemas.codes import Country, Currency, TimeZone
from recoup.wire.schemas.common import (
    Instant,
    Integer,
    Number,
    OutboundUrl,
    PolicyToml,
    StrictModel,
    Text,
)
from recoup.wire.schemas.stated import Stated, one_of

Id = Field(min_length=1, max_length=100)


def _invoice_id(value: str) -> str:
    if not _INVOICE_ID.fullmatch(value):
        raise ValueError(INVOICE_ID_RULE)
    return value


_INVOICE_ID = re.compile(INVOICE_ID_PATTERN)
# Characters of a policy's TOML: two texts this long (a policy and an experiment's) fit the
# body limit (256 KiB) however a client encodes them (12 bytes for a character escaped as a
# surrogate pair), with both URLs and the experiment's name.
MAX_POLICY_LENGTH = 8 * 1024


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

    def to_report(self) -> FailureReport:
        card = self.card or CardIn()
        return FailureReport(
            invoice_id=self.invoice_id,
            customer_id=self.customer_id,
            amount=self.amount,
            currency=self.currency,
            failed_at=self.failed_at,
            timezone=self.timezone,
            country=self.country.upper() if self.country else None,
            decline_code=self.decline_code,
            advice_code=self.advice_code,
            card_fingerprint=card.fingerprint,
            card_network=card.network.lower() if card.network else None,
            gateway=self.gateway,
            merchant_id=self.merchant_id,
            charge_url=self.charge_url,
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


class EventOut(BaseModel):
    id: str
    seq: int
    type: str
    at: datetime
    data: dict[str, Any]

    @classmethod
    def of(cls, event: InvoiceEvent) -> EventOut:
        return cls(id=event.id, seq=event.seq, type=event.type, at=event.at, data=event.data)


class TimelineOut(InvoiceOut):
    attempts: list[TimelineAttemptOut]  # type: ignore[assignment]
    timezone: str
    decline_code: str | None
    advice_code: str | None
    charge_url: str
    policy: str
    events: list[EventOut]

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
        )


# As `recoup.recovery.intake_store` checks it (stated here; that check never quotes a secret).
STRIPE_SECRET = "^whsec_[!-~]{8,250}$"
STRIPE_API_KEY = "^(sk|rk)_(test|live)_[0-9A-Za-z]{8,250}$"


class SettingsIn(StrictModel):
    """A tenant's settings. The three experiment fields go together, or none."""

    model_config = ConfigDict(
        json_schema_extra=one_of(
            {"experiment_name": "null", "experiment_policy": "null", "experiment_share": "null"},
            {
                "experiment_name": "string",
                "experiment_policy": "string",
                "experiment_share": "number",
            },
        )
    )

    policy: PolicyToml | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_POLICY_LENGTH,
        description=(
            "A dunning policy as TOML text, in the format of the shipped presets "
            "(recoup/dunning/data/policies); null: the business-days preset."
        ),
    )
    event_url: OutboundUrl | None = Field(default=None, min_length=1, max_length=2048)
    charge_url: OutboundUrl | None = Field(default=None, min_length=1, max_length=2048)
    experiment_name: Text | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="A policy experiment: its name (the split is a hash of tenant, invoice id "
        "and this name). The three experiment fields go together, or none.",
    )
    experiment_policy: PolicyToml | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_POLICY_LENGTH,
        description="The experiment's second policy (arm b) as TOML text; `policy` is arm a. "
        "Its name must differ from arm a's.",
    )
    experiment_share: Number | None = Field(
        default=None, gt=0, lt=1, description="The share of new invoices planned with arm b."
    )
    # Checked by the intake settings, which never quote it in an error.
    stripe_webhook_secret: Annotated[str, Stated(pattern=STRIPE_SECRET)] | None = Field(
        default=None,
        description="The Stripe endpoint's signing secret (`whsec_…`) that verifies webhooks "
        "at /v1/intake/stripe/{tenant}. Write-only: never shown again. Left out: kept (unlike "
        "the other fields); null: removed.",
    )
    default_timezone: TimeZone | None = Field(
        default=None,
        description="The IANA zone of customers whose Stripe events name none; null: UTC.",
    )
    charge_with: Literal["url", "stripe"] | None = Field(
        default=None,
        description="Where attempts are charged: `url` (the charge endpoint, `charge_url`) or "
        "`stripe` (Recoup pays the Stripe invoice itself with `stripe_api_key`). Left out: "
        "kept (unlike the other fields); `url` removes the stored key.",
    )
    # Checked by the hosted-charging settings, which never quote it in an error.
    stripe_api_key: Annotated[str, Stated(pattern=STRIPE_API_KEY)] | None = Field(
        default=None,
        description="A Stripe secret or restricted key (`sk_…`, `rk_…`) to charge with; needs "
        "`charge_with` `stripe` (now or before). Write-only, stored sealed, never shown again. "
        "Left out or null: kept (`charge_with` `url` removes it).",
    )


class SettingsOut(BaseModel):
    policy: str | None
    event_url: str | None
    charge_url: str | None
    updated_at: datetime
    experiment_name: str | None = None
    experiment_policy: str | None = None
    experiment_share: float | None = None
    stripe_webhook_secret_set: bool = Field(
        default=False, description="Whether a Stripe endpoint secret is set (never the secret)."
    )
    default_timezone: str = "UTC"
    charge_with: Literal["url", "stripe"] = "url"
    stripe_api_key_set: bool = Field(
        default=False, description="Whether a Stripe API key is set (never the key)."
    )

    @classmethod
    def of(
        cls,
        settings: DunningSettings,
        intake: IntakeSettings | None = None,
        charge_with: Literal["url", "stripe"] = "url",
    ) -> SettingsOut:
        return cls(
            policy=settings.policy_toml,
            event_url=settings.event_url,
            charge_url=settings.charge_url,
            updated_at=settings.updated_at,
            experiment_name=settings.experiment_name,
            experiment_policy=settings.experiment_policy_toml,
            experiment_share=settings.experiment_share,
            stripe_webhook_secret_set=bool(intake and intake.stripe_webhook_secret),
            default_timezone=intake.default_timezone if intake else DEFAULT_TIMEZONE,
            charge_with=charge_with,
            stripe_api_key_set=charge_with == "stripe",
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
