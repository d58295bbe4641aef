"""A tenant's customers as the API and the command line see them: who Recoup writes to (read
and changed, checked by `recovery.contacts`), and their access state with the job that looks
at it again when a grace period ends (`recovery.access_tracking`)."""

from __future__ import annotations

import asyncio

from recoup.errors import NotFound
from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.recovery.access_tracking import ACCESS_HANDLER
from recoup.recovery.contacts import display_name, email_address, locale_tag
from recoup.recovery.customer_store import Customer
from recoup.recovery.records import MAX_ID_LENGTH
from recoup.recovery.service import Dunning


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
