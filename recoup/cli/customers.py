"""`recoup customers show|set`: who Recoup writes to, and the customer's access state.

Contract:

    recoup customers show CUSTOMER_ID [--tenant T] [--db URL] [--schema S] [--json]
    recoup customers set CUSTOMER_ID [--email ADDRESS] [--name NAME] [--locale L]
        [--tenant T] [--db URL] [--schema S] [--json]
        → {"customer_id", "email", "name", "locale", "access", "access_changed_at",
           "suppressed", "suppressed_at", "suppressed_reason", "updated_at"}

`set` changes what it is given and keeps the rest (a new address clears a suppression of the
old one); a bad address or locale exits 2 naming the option. `show` of a customer Recoup does
not know: exit 1. The JSON is `GET /v1/dunning/customers/{id}`'s.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer

from recoup.cli._app import DbOption, JsonOption, SchemaOption, app, print_json, store_options
from recoup.cli._records import TenantOption
from recoup.errors import InvalidInput, NotFound
from recoup.jobs.model import DEFAULT_TENANT
from recoup.recovery.customer_store import Customer

customers_app = typer.Typer(
    help="Customers: who Recoup writes to, and their access state.", no_args_is_help=True
)
app.add_typer(customers_app, name="customers")

CustomerArgument = Annotated[str, typer.Argument(help="The customer's id (the provider's).")]


def _book(db: str, schema: str | None, tenant: str, act: Any) -> Customer:
    from recoup.jobs.scheduler import Scheduler
    from recoup.recovery.customers import CustomerBook
    from recoup.recovery.service import Dunning
    from recoup.storage import open_store
    from recoup.timekeeping.clock import SystemClock

    store = open_store(db, **store_options(schema, db))
    try:
        if tenant != DEFAULT_TENANT and store.get_tenant(tenant) is None:
            raise NotFound(f"no tenant {tenant!r}; `recoup tenants list` shows them")
        found: Customer = act(CustomerBook(Dunning(Scheduler(store, clock=SystemClock()), store)))
        return found
    finally:
        store.close()


def _show(customer: Customer, json: bool) -> None:
    from recoup.timekeeping.instants import format_utc

    def instant(value: datetime | None) -> str | None:
        return None if value is None else format_utc(value)

    row = {  # GET /v1/dunning/customers/{id}'s shape
        "customer_id": customer.customer_id,
        "email": customer.email,
        "name": customer.name,
        "locale": customer.locale,
        "access": customer.access.value,
        "access_changed_at": instant(customer.access_changed_at),
        "suppressed": customer.is_suppressed,
        "suppressed_at": instant(customer.suppressed_at),
        "suppressed_reason": customer.suppressed_reason,
        "updated_at": instant(customer.updated_at),
    }
    if json:
        print_json(row)
        return
    for key, value in row.items():
        if value is not None:
            typer.echo(f"{key}: {value}")


@customers_app.command("show")
def show_customer(
    customer_id: CustomerArgument,
    tenant: TenantOption = DEFAULT_TENANT,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Who Recoup writes to, and the customer's access as their invoices give it."""
    _show(_book(db, schema, tenant, lambda book: book.get(tenant, customer_id)), json)


@customers_app.command("set")
def set_customer(
    customer_id: CustomerArgument,
    email: Annotated[str | None, typer.Option(help="The address Recoup writes to.")] = None,
    name: Annotated[str | None, typer.Option(help="The name the emails greet.")] = None,
    locale: Annotated[
        str | None, typer.Option(help="The customer's language: de-DE, en_US, …")
    ] = None,
    tenant: TenantOption = DEFAULT_TENANT,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Set the customer's address, name or locale (what is left out is kept)."""

    def change(book: Any) -> Customer:
        try:
            found: Customer = book.update(
                tenant, customer_id, email=email, name=name, locale=locale
            )
        except InvalidInput as exc:  # named as the option the user typed
            raise InvalidInput(f"--{exc.field}", exc.value, exc.allowed) from None
        return found

    _show(_book(db, schema, tenant, change), json)


__all__ = ["customers_app"]
