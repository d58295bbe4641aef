"""The /v1/dunning routes of customers: who Recoup writes to, their access state, a card
update reported for the customer, and upcoming renewals (card_expiring reminders).

Route handlers translate HTTP to `recoup.recovery.customers.CustomerBook` calls and nothing
more; the authenticated tenant scopes every call, so another tenant's customer reads as
absent (404).
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from recoup.api.deps import Api, Post, Tenant
from recoup.api.idempotent import json_response
from recoup.api.routes.common import CHECKED, ERRORS, Id
from recoup.recovery.customers import CustomerBook
from recoup.wire.customers import (
    CardUpdateIn,
    CardUpdateOut,
    CustomerIn,
    CustomerOut,
    RenewalIn,
    RenewalOut,
)
from recoup.wire.dunning import InvoiceOut

router = APIRouter(prefix="/v1/dunning", responses=ERRORS, tags=["customers"], dependencies=CHECKED)


@router.get("/customers/{customer_id}", response_model=CustomerOut)
def get_customer(customer_id: Id, tenant: Tenant, api: Api) -> Response:
    """Who Recoup writes to (address, name, locale, whether the address is suppressed) and
    the customer's `access` as their invoices in dunning give it."""
    return json_response(200, CustomerOut.of(CustomerBook(api.dunning).get(tenant, customer_id)))


@router.put("/customers/{customer_id}", response_model=CustomerOut)
def put_customer(customer_id: Id, body: CustomerIn, tenant: Tenant, api: Api) -> Response:
    """Set the customer's address, name or locale (each one left out is kept); a customer
    Recoup did not know is created. A new address clears a suppression of the old one."""
    customer = CustomerBook(api.dunning).update(
        tenant, customer_id, email=body.email, name=body.name, locale=body.locale
    )
    return json_response(200, CustomerOut.of(customer))


@router.post("/customers/{customer_id}/payment-method-updated", response_model=CardUpdateOut)
def customer_payment_method_updated(
    customer_id: Id, body: CardUpdateIn, ctx: Post, api: Api
) -> Response:
    """The customer has a new or corrected card: the card_expiring reminders it makes
    needless are cancelled (given its expiry, one of a renewal it does not cover either is
    kept), and each of their invoices retrying or awaiting them is re-planned on it."""

    def operation() -> CardUpdateOut:
        card = body.card
        cancelled, invoices = CustomerBook(api.dunning).card_updated(
            ctx.tenant,
            customer_id,
            exp_month=card.exp_month if card else None,
            exp_year=card.exp_year if card else None,
        )
        return CardUpdateOut(
            reminders_cancelled=[RenewalOut.of(r) for r in cancelled],
            invoices=[InvoiceOut.of(i) for i in invoices],
        )

    return ctx.run(200, operation)


@router.post(
    "/renewals",
    status_code=201,
    response_model=RenewalOut,
    responses={200: {"model": RenewalOut, "description": "The same renewal again: updated."}},
)
def tell_renewal(body: RenewalIn, ctx: Post, api: Api) -> Response:
    """Tell Recoup of an upcoming renewal (201). When the card will have expired by the
    renewal's local date, a card_expiring email is planned `card_expiry_days_before` days
    ahead (the policy's `[messages]`), in the customer's daytime window, and cancelled if the
    card is updated first. The same customer and `renews_at` again is the same renewal (200),
    its card and amount replaced: a valid card then cancels the reminder."""
    report = body.to_report()

    def operation() -> tuple[int, RenewalOut]:
        renewal, created = CustomerBook(api.dunning).tell_renewal(ctx.tenant, report)
        return (201 if created else 200), RenewalOut.of(renewal)

    return ctx.run_with_status(operation)


__all__ = ["router"]
