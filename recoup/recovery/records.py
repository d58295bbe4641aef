"""What the dunning runtime (`service.Dunning`) takes in and hands out: a failed charge
(`FailureReport`, checked as it is made), an invoice's timeline, and `KEEP`, a setting left
as it is."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from recoup.dunning.invoice import Invoice, InvoiceEvent, check_invoice_id
from recoup.errors import InvalidInput
from recoup.jobs.model import Run
from recoup.recovery.contacts import display_name, email_address, locale_tag
from recoup.recovery.email_store import Email
from recoup.timekeeping.instants import require_aware
from recoup.timekeeping.zones import zone

MAX_ID_LENGTH = 100
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class FailureReport:
    """A failed charge handed to Recoup (`POST /v1/dunning/failures`)."""

    invoice_id: str
    customer_id: str
    amount: int  # minor units
    currency: str
    failed_at: datetime
    timezone: str
    country: str | None = None
    decline_code: str | None = None
    advice_code: str | None = None
    card_fingerprint: str | None = None
    card_network: str | None = None
    gateway: str | None = None
    merchant_id: str | None = None
    charge_url: str | None = None  # default: the tenant's
    # Who to write to (`recovery.contacts`): stored on the customer, None keeps what is known.
    customer_email: str | None = None
    customer_name: str | None = None
    locale: str | None = None  # written babel's way (`de-DE` becomes `de_DE`)

    def __post_init__(self) -> None:
        require_aware("failed_at", self.failed_at)
        # Frozen: the contact details are written once, in their one form, as they are made.
        if self.customer_email is not None:
            object.__setattr__(self, "customer_email", email_address(self.customer_email))
        if self.customer_name is not None:
            object.__setattr__(self, "customer_name", display_name(self.customer_name))
        if self.locale is not None:
            object.__setattr__(self, "locale", locale_tag(self.locale))
        # Every entrance (API, Stripe intake, CLI, demo) builds a report: the one check of ids.
        check_invoice_id(self.invoice_id)
        if not 1 <= len(self.customer_id) <= MAX_ID_LENGTH or "\x00" in self.customer_id:
            raise InvalidInput(
                "customer_id", self.customer_id, f"expected 1–{MAX_ID_LENGTH} characters"
            )
        if self.amount <= 0:
            raise InvalidInput("amount", self.amount, "expected a positive integer (minor units)")
        if len(self.currency) != 3 or not self.currency.isascii() or not self.currency.isalpha():
            raise InvalidInput("currency", self.currency, "expected an ISO 4217 code such as usd")
        zone(self.timezone)  # UnknownTimeZone names `timezone`

    def same_failure(self, invoice: Invoice) -> bool:
        """A replayed report of the failure that opened `invoice` (a provider webhook sent
        twice): same instant, same decline."""
        return (
            invoice.failed_at == self.failed_at
            and invoice.decline_code == self.decline_code
            and invoice.advice_code == self.advice_code
        )


@dataclass(frozen=True, kw_only=True)
class Timeline:
    invoice: Invoice
    events: list[InvoiceEvent]
    runs: dict[int, list[Run]]  # attempt number → its job's run log
    emails: list[Email] = field(default_factory=list)  # the invoice's emails, by send_at
    email_runs: dict[str, list[Run]] = field(default_factory=dict)  # message key → run log


class Keep(enum.Enum):
    """A setting left as it is (`Dunning.configure`)."""

    KEEP = "keep"


KEEP = Keep.KEEP


def given_or_kept(given: T | Keep, stored: T) -> T:
    return stored if isinstance(given, Keep) else given


__all__ = ["KEEP", "MAX_ID_LENGTH", "FailureReport", "Keep", "Timeline", "given_or_kept"]
