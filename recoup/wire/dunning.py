"""Request and response models of /v1/dunning and /v1/clock (strict, as in `schemas`)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from recoup.dunning.access import Access
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
from recoup.recovery.customer_store import Customer, Renewal
from recoup.recovery.email_settings import (
    ADDRESS_PATTERN,
    SMTP_URL_PATTERN,
    UPDATE_CARD_URL_PATTERN,
)
from recoup.recovery.email_store import Email, MessageSettings
from recoup.recovery.intake_store import DEFAULT_TIMEZONE, IntakeSettings
from recoup.recovery.records import FailureReport, Timeline
from recoup.recovery.renewals import MAX_EXP_YEAR, MIN_EXP_YEAR, RenewalReport
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
from recoup.wire.timing import AttemptTimingOut

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


class CustomerIn(StrictModel):
    """A customer's contact details: each one given replaces the stored one, each one left
    out (or null) is kept. A new address clears a suppression of the old one."""

    email: CustomerEmail | None = Field(
        default=None, min_length=3, max_length=254, description="One address, no display name."
    )
    name: CustomerName | None = Field(default=None, min_length=1, max_length=200)
    locale: Locale | None = Field(
        default=None,
        min_length=2,
        max_length=35,
        description="BCP 47 or babel style (`de-DE`, `en_US`); stored babel's way (`de_DE`).",
    )


class CustomerOut(BaseModel):
    customer_id: str
    email: str | None
    name: str | None
    locale: str | None
    access: Access = Field(
        description="What the customer may use while their payments are in dunning: `active`, "
        "`grace` (retries run, within the policy's `[access] grace_days`), `restricted` "
        "(retries run past the grace, or a debt left open), `paused` (the final action paused "
        "access or cancelled). Each change is sent as `customer.access_changed`."
    )
    access_changed_at: datetime | None
    suppressed: bool = Field(description="The address bounced or was suppressed: not written to.")
    suppressed_at: datetime | None
    suppressed_reason: str | None
    updated_at: datetime

    @classmethod
    def of(cls, customer: Customer) -> CustomerOut:
        return cls(
            customer_id=customer.customer_id,
            email=customer.email,
            name=customer.name,
            locale=customer.locale,
            access=customer.access,
            access_changed_at=customer.access_changed_at,
            suppressed=customer.is_suppressed,
            suppressed_at=customer.suppressed_at,
            suppressed_reason=customer.suppressed_reason,
            updated_at=customer.updated_at,
        )


class ExpiryIn(StrictModel):
    exp_month: Integer = Field(ge=1, le=12)
    exp_year: Integer = Field(ge=MIN_EXP_YEAR, le=MAX_EXP_YEAR, description="Four digits.")


class RenewalIn(StrictModel):
    """An upcoming renewal: the same customer and `renews_at` again is the same renewal (its
    card and amount the latest told)."""

    customer_id: Text = Id
    customer_email: CustomerEmail | None = Field(
        default=None, min_length=3, max_length=254, description="Stored on the customer."
    )
    customer_name: CustomerName | None = Field(default=None, min_length=1, max_length=200)
    locale: Locale | None = Field(default=None, min_length=2, max_length=35)
    renews_at: Instant
    amount: Amount = Field(ge=0, le=10**15, description="Integer minor units (cents).")
    currency: Currency = Field(description="ISO 4217, e.g. usd.")
    timezone: TimeZone = Field(description="The customer's IANA zone.")
    card: ExpiryIn | None = Field(
        default=None,
        description="The card the renewal will be charged on; when it will have expired by "
        "the renewal's local date, a card_expiring email goes out before it. Left out: "
        "unknown, no reminder.",
    )

    def to_report(self) -> RenewalReport:
        return RenewalReport(
            customer_id=self.customer_id,
            renews_at=self.renews_at,
            amount=self.amount,
            currency=self.currency,
            timezone=self.timezone,
            exp_month=self.card.exp_month if self.card else None,
            exp_year=self.card.exp_year if self.card else None,
            customer_email=self.customer_email,
            customer_name=self.customer_name,
            locale=self.locale,
        )


class ExpiryOut(BaseModel):
    exp_month: int
    exp_year: int


class RenewalOut(BaseModel):
    renewal_id: str
    customer_id: str
    renews_at: datetime
    amount: int
    currency: str
    timezone: str
    card: ExpiryOut | None
    reminder: Literal["no_reminder", "reminder_scheduled", "reminder_cancelled"] = Field(
        description="`reminder_scheduled`: the card will have expired by the renewal, a "
        "card_expiring email is planned (`reminder_job_id`); `reminder_cancelled`: the card "
        "was updated first; `no_reminder`: the card is valid then, not known, or the tenant "
        "sends no emails."
    )
    reminder_job_id: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, renewal: Renewal) -> RenewalOut:
        card = None
        if renewal.exp_month is not None and renewal.exp_year is not None:
            card = ExpiryOut(exp_month=renewal.exp_month, exp_year=renewal.exp_year)
        return cls(
            renewal_id=renewal.renewal_id,
            customer_id=renewal.customer_id,
            renews_at=renewal.renews_at,
            amount=renewal.amount,
            currency=renewal.currency,
            timezone=renewal.timezone,
            card=card,
            reminder=renewal.state.value,
            reminder_job_id=renewal.reminder_job_id,
            created_at=renewal.created_at,
            updated_at=renewal.updated_at,
        )


class CardUpdateIn(StrictModel):
    card: ExpiryIn | None = Field(
        default=None,
        description="The new card's expiry, when known: a reminder of a renewal it does not "
        "cover either is kept. Left out: every scheduled reminder is cancelled.",
    )


class CardUpdateOut(BaseModel):
    reminders_cancelled: list[RenewalOut]
    invoices: list[InvoiceOut] = Field(description="The invoices re-planned on the new card.")


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
    # Checked by the email settings (recoup.recovery.email_settings), which never quote the
    # password in an error.
    smtp_url: Annotated[str, Stated(pattern=SMTP_URL_PATTERN)] | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="The SMTP server customers' emails go through: "
        "`smtp://user:pass@host:port` (STARTTLS when offered; `?starttls=require` to insist) "
        "or `smtps://…` (TLS from the start). Write-only, stored sealed, never shown again "
        "(GET shows `smtp_configured`). Left out: kept (unlike the other fields); null: "
        "removed (no more emails).",
    )
    email_from: Annotated[str, Stated(pattern=ADDRESS_PATTERN)] | None = Field(
        default=None,
        min_length=3,
        max_length=320,
        description="The sender of customers' emails, e.g. \"Acme Billing "
        '<billing@acme.example>"; needed with an SMTP server.',
    )
    reply_to: Annotated[str, Stated(pattern=ADDRESS_PATTERN)] | None = Field(
        default=None, min_length=3, max_length=320, description="Where replies go."
    )
    update_card_url: Annotated[str, Stated(pattern=UPDATE_CARD_URL_PATTERN)] | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="The emails' link when the provider has no payment page: an https URL "
        "containing `{token}` (a signed token naming tenant, customer and invoice, which the "
        "app verifies with `recoup.receiver.verify_update_token`).",
    )
    email_templates: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="A directory on the server whose templates override the shipped ones.",
    )
    allow_unsubscribe: bool = Field(
        default=False,
        description="Reminders (retry_failed, card_expiring) carry `List-Unsubscribe`; the "
        "required notices never do.",
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
    smtp_configured: bool = Field(
        default=False, description="Whether an SMTP server is set (never its URL)."
    )
    email_from: str | None = None
    reply_to: str | None = None
    update_card_url: str | None = None
    email_templates: str | None = None
    allow_unsubscribe: bool = False

    @classmethod
    def of(
        cls,
        settings: DunningSettings,
        intake: IntakeSettings | None = None,
        charge_with: Literal["url", "stripe"] = "url",
        emails: MessageSettings | None = None,
    ) -> SettingsOut:
        email_fields: dict[str, Any] = {}
        if emails is not None:
            email_fields = {
                "smtp_configured": emails.smtp_url is not None,
                "email_from": emails.email_from,
                "reply_to": emails.reply_to,
                "update_card_url": emails.update_card_url,
                "email_templates": emails.templates_dir,
                "allow_unsubscribe": emails.allow_unsubscribe,
            }
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
            **email_fields,
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
