"""Request and response models of /v1/dunning/customers: a customer's contact details, access
and renewals, and a card update (strict, as in `schemas`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from recoup.dunning.access import Access
from recoup.recovery.customer_store import Customer, Renewal
from recoup.recovery.renewals import MAX_EXP_YEAR, MIN_EXP_YEAR, RenewalReport
from recoup.wire.dunning import (
    Amount,
    CustomerEmail,
    CustomerName,
    Id,
    InvoiceOut,
    Locale,
)
from recoup.wire.schemas.codes import Currency, TimeZone
from recoup.wire.schemas.common import (
    Instant,
    Integer,
    StrictModel,
    Text,
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
