"""What Recoup keeps of a tenant's customers (migration 0012_customers.sql): where to write
to them and in which language, whether their address is suppressed (a bounce, a complaint),
their access state (`recoup.dunning.access`), and their upcoming renewals with the reminder
sent when the card will have expired by then.

Stores implement `CustomerStore`, exposed whole as `store.customers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from recoup.dunning.access import Access
from recoup.dunning.invoice import InvoiceState
from recoup.timekeeping.instants import require_aware

MAX_REASON = 500  # characters of a suppression's reason (an SMTP reply is longer: cut)


@dataclass(frozen=True, kw_only=True)
class Customer:
    """One customer of a tenant. `email` None: Recoup has no address to write to;
    `suppressed_at` set: the address bounced or was suppressed, and is not written to again
    until the customer has another one."""

    tenant: str
    customer_id: str
    email: str | None
    name: str | None
    locale: str | None  # babel style (`de_DE`), see `recovery.contacts.locale_tag`
    access: Access
    updated_at: datetime
    access_changed_at: datetime | None = None
    suppressed_at: datetime | None = None
    suppressed_reason: str | None = None

    def __post_init__(self) -> None:
        require_aware("updated_at", self.updated_at)
        for name in ("access_changed_at", "suppressed_at"):
            value = getattr(self, name)
            if value is not None:
                require_aware(name, value)

    @property
    def is_suppressed(self) -> bool:
        return self.suppressed_at is not None

    @property
    def writable(self) -> bool:
        """Recoup may write to the customer: an address, not suppressed."""
        return self.email is not None and not self.is_suppressed


class RenewalState(StrEnum):
    NO_REMINDER = "no_reminder"  # the card is valid at the renewal (or unknown)
    REMINDER_SCHEDULED = "reminder_scheduled"  # its job sends card_expiring
    REMINDER_CANCELLED = "reminder_cancelled"  # the card was updated first


@dataclass(frozen=True, kw_only=True)
class Renewal:
    """An upcoming renewal of a customer's subscription, and the card it is to be charged on
    (`exp_month`/`exp_year` None: not known)."""

    tenant: str
    renewal_id: str
    customer_id: str
    renews_at: datetime
    amount: int  # minor units
    currency: str
    timezone: str
    exp_month: int | None
    exp_year: int | None
    state: RenewalState
    created_at: datetime
    updated_at: datetime
    reminder_job_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("renews_at", "created_at", "updated_at"):
            require_aware(name, getattr(self, name))


@dataclass(frozen=True, kw_only=True)
class CustomerInvoice:
    """What the customer's access needs of one of their invoices in dunning."""

    invoice_id: str
    state: InvoiceState
    final_action: str
    failed_at: datetime
    policy: str  # its policy's name (the grace period is the policy's)


class CustomerStore(Protocol):
    def get_customer(self, tenant: str, customer_id: str) -> Customer | None: ...

    def put_customer(
        self,
        tenant: str,
        customer_id: str,
        *,
        email: str | None = None,
        name: str | None = None,
        locale: str | None = None,
        at: datetime,
    ) -> Customer:
        """Create the customer or change what is given (None: kept as stored). A new address
        (another mailbox than the stored one) clears a suppression of the old one."""
        ...

    def suppress(
        self, tenant: str, customer_id: str, *, email: str, reason: str, at: datetime
    ) -> Customer | None:
        """Record that `email` bounced or was suppressed: the customer is not written to at
        that address again. Only while it is still the customer's address (a bounce of an
        address since replaced changes nothing); a customer without one takes it, suppressed.
        Returns the customer as stored; a first suppression's instant and reason stay."""
        ...

    def set_access(
        self, tenant: str, customer_id: str, access: Access, *, at: datetime
    ) -> Customer:
        """Record the customer's access state (created if Recoup did not know them)."""
        ...

    def lock_customer(self, tenant: str, customer_id: str, *, at: datetime) -> Customer:
        """The customer (created if Recoup did not know them), locked until the transaction
        ends (one decides their access at a time)."""
        ...

    def customer_invoices(self, tenant: str, customer_id: str) -> list[CustomerInvoice]:
        """The customer's invoices retrying, awaiting them or exhausted, oldest first."""
        ...

    def put_renewal(self, renewal: Renewal) -> tuple[Renewal, bool]:
        """Store a renewal (True), or replace the stored one of the same id (False): a
        renewal told again carries the latest card."""
        ...

    def get_renewal(self, tenant: str, renewal_id: str) -> Renewal | None: ...

    def customer_renewals(
        self, tenant: str, customer_id: str, *, state: RenewalState | None = None
    ) -> list[Renewal]:
        """The customer's renewals, soonest first (only those in `state` if given)."""
        ...


__all__ = [
    "MAX_REASON",
    "Customer",
    "CustomerInvoice",
    "CustomerStore",
    "Renewal",
    "RenewalState",
]
