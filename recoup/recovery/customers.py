"""A tenant's customers as the API and the command line see them: who Recoup writes to (read
and changed, checked by `recovery.contacts`), their access state with the job that looks at it
again when a grace period ends (`recovery.access_tracking`), their upcoming renewals and a
card update reported for the customer (`recovery.renewals`)."""

from __future__ import annotations

import asyncio

from recoup.dunning.invoice import Invoice, InvoiceState
from recoup.errors import NotFound
from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.recovery.access_tracking import ACCESS_HANDLER
from recoup.recovery.contacts import display_name, email_address, locale_tag
from recoup.recovery.customer_store import Customer, Renewal
from recoup.recovery.records import MAX_ID_LENGTH
from recoup.recovery.renewals import RenewalReport
from recoup.recovery.service import Dunning
from recoup.recovery.store import InvoiceFilter

_OPEN = (InvoiceState.AWAITING_CUSTOMER, InvoiceState.RETRYING)


class CustomerBook:
    """The customers of every tenant, over the dunning runtime's store."""

    def __init__(self, dunning: Dunning) -> None:
        self.dunning = dunning

    def get(self, tenant: str, customer_id: str) -> Customer:
        found = self.dunning.store.customers.get_customer(tenant, customer_id)
        if found is None:
            raise NotFound(f"no customer {customer_id!r}")
        return found

    def update(
        self,
        tenant: str,
        customer_id: str,
        *,
        email: str | None = None,
        name: str | None = None,
        locale: str | None = None,
    ) -> Customer:
        """Create the customer or change what is given (None: kept). A new address clears a
        suppression of the old one: the customer is written to again."""
        if not 1 <= len(customer_id) <= MAX_ID_LENGTH or "\x00" in customer_id:
            raise NotFound(f"no customer {customer_id!r}")
        return self.dunning.store.customers.put_customer(
            tenant,
            customer_id,
            email=None if email is None else email_address(email, "email"),
            name=None if name is None else display_name(name, "name"),
            locale=None if locale is None else locale_tag(locale, "locale"),
            at=self.dunning.clock.now(),
        )

    def tell_renewal(self, tenant: str, report: RenewalReport) -> tuple[Renewal, bool]:
        """Store an upcoming renewal (True: new; the same customer and instant again: the
        same renewal, False) and plan or cancel its card_expiring reminder."""
        dunning = self.dunning
        now = dunning.clock.now()
        return dunning.store.atomically(lambda: dunning.reminders.tell(tenant, report, now=now))

    def card_updated(
        self,
        tenant: str,
        customer_id: str,
        *,
        exp_month: int | None = None,
        exp_year: int | None = None,
    ) -> tuple[list[Renewal], list[Invoice]]:
        """The customer has a new or corrected card (its expiry, when known): the renewal
        reminders it makes needless are cancelled, and each of their invoices retrying or
        awaiting them is re-planned on it. Returns (the renewals whose reminder was
        cancelled, the invoices re-planned)."""
        dunning = self.dunning
        now = dunning.clock.now()
        cancelled = dunning.store.atomically(
            lambda: dunning.reminders.card_updated(
                tenant, customer_id, exp_month=exp_month, exp_year=exp_year, now=now
            )
        )
        # Listed whole before any update: an update moves an invoice from awaiting the
        # customer to retrying, where a listing still to come would find it again.
        waiting = [
            invoice
            for state in _OPEN
            for invoice in _all_invoices(dunning, tenant, customer_id, state)
        ]
        updated = [dunning.payment_method_updated(tenant, i.invoice_id) for i in waiting]
        return cancelled, updated


def _all_invoices(
    dunning: Dunning, tenant: str, customer_id: str, state: InvoiceState
) -> list[Invoice]:
    found: list[Invoice] = []
    cursor: str | None = None
    while True:
        page = dunning.list_invoices(
            InvoiceFilter(tenant=tenant, state=state, customer_id=customer_id, cursor=cursor)
        )
        found.extend(page.invoices)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def register_customer_jobs(registry: HandlerRegistry, dunning: Dunning) -> HandlerRegistry:
    """Add the handler of the access job (`access_tracking.access_job`) to `registry`."""

    async def recheck_access(ctx: HandlerContext) -> str:
        invoice_id = str(ctx.payload["invoice_id"])
        invoice = await asyncio.to_thread(dunning.recheck_access, ctx.tenant, invoice_id)
        if invoice is None:
            return f"invoice {invoice_id} is gone"
        customer = dunning.store.customers.get_customer(ctx.tenant, invoice.customer_id)
        access = customer.access if customer is not None else "unknown"
        return f"customer {invoice.customer_id}: access {access}"

    registry.add(ACCESS_HANDLER, recheck_access)
    return registry


__all__ = ["CustomerBook", "register_customer_jobs"]
