"""The /v1/dunning routes of customers: who Recoup writes to and their access state.

Route handlers translate HTTP to `recoup.recovery.customers.CustomerBook` calls and nothing
more; the authenticated tenant scopes every call, so another tenant's customer reads as
absent (404).
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from recoup.api.deps import Api, Tenant
from recoup.api.idempotent import json_response
from recoup.api.routes.common import CHECKED, ERRORS, Id
from recoup.recovery.customers import CustomerBook
from recoup.wire.dunning import CustomerIn, CustomerOut

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


__all__ = ["router"]
