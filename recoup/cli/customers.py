"""`recoup customers show|set`: who Recoup writes to, and the customer's access state.

Contract:

    recoup customers show CUSTOMER_ID [--tenant T] [--db URL] [--schema S] [--json]
    recoup customers set CUSTOMER_ID [--email ADDRESS] [--name NAME] [--locale L]
        [--tenant T] [--db URL] [--schema S] [--json]
        → {"customer_id", "email", "name", "locale", "access", "access_changed_at",
           "suppressed", "suppressed_at", "suppressed_reason", "updated_at"}

`set` changes what it is given and keeps the rest (a new address clears a suppression of the
old one); a bad address or locale exits 2 naming the option. `show` of a customer Recoup does
not know: exit 2, one line naming it (from a database or a server alike). The JSON is `GET
/v1/dunning/customers/{id}`'s. With `--url URL --token T` (or RECOUP_URL, RECOUP_TOKEN) instead
of `--db`, they read and change the customer on a remote
`recoup serve`; its refusals are one line, exit 2 (a 4xx) or 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from recoup.cli._app import JsonOption, SchemaOption, app, print_json
from recoup.cli._records import instant
from recoup.cli._where import (
    DbOption,
    TenantOption,
    TokenOption,
    UrlOption,
    Where,
    opened_client,
    opened_store,
    where,
)
from recoup.errors import InvalidInput

if TYPE_CHECKING:
    from recoup.client import Client
    from recoup.recovery.customer_store import Customer
    from recoup.recovery.customers import CustomerBook
    from recoup.wire.customers import CustomerOut

customers_app = typer.Typer(
    help="Customers: who Recoup writes to, and their access state.", no_args_is_help=True
)
app.add_typer(customers_app, name="customers")

CustomerArgument = Annotated[str, typer.Argument(help="The customer's id (the provider's).")]


def _customer(
    place: Where,
    local: Callable[[CustomerBook, str], Customer],
    remote: Callable[[Client], CustomerOut],
) -> CustomerOut:
    """The customer as the API answers it: `local` on the book of a database's tenant, or
    `remote` through the server's client."""
    if place.remote:
        with opened_client(place) as (client, _):
            return remote(client)
    from recoup.jobs.scheduler import Scheduler
    from recoup.recovery.customers import CustomerBook
    from recoup.recovery.service import Dunning
    from recoup.timekeeping.clock import SystemClock
    from recoup.wire.customers import CustomerOut

    with opened_store(place) as (store, tenant):
        book = CustomerBook(Dunning(Scheduler(store, clock=SystemClock()), store))
        return CustomerOut.of(local(book, tenant))


def _show(customer: CustomerOut, json: bool) -> None:
    row = {  # GET /v1/dunning/customers/{id}'s shape
        "customer_id": customer.customer_id,
        "email": customer.email,
        "name": customer.name,
        "locale": customer.locale,
        "access": customer.access.value,
        "access_changed_at": instant(customer.access_changed_at),
        "suppressed": customer.suppressed,
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
    tenant: TenantOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Who Recoup writes to, and the customer's access as their invoices give it."""
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    found = _customer(
        place,
        lambda book, tenant: book.get(tenant, customer_id),
        lambda client: client.get_customer(customer_id),
    )
    _show(found, json)


@customers_app.command("set")
def set_customer(
    customer_id: CustomerArgument,
    email: Annotated[str | None, typer.Option(help="The address Recoup writes to.")] = None,
    name: Annotated[str | None, typer.Option(help="The name the emails greet.")] = None,
    locale: Annotated[
        str | None, typer.Option(help="The customer's language: de-DE, en_US, …")
    ] = None,
    tenant: TenantOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Set the customer's address, name or locale (what is left out is kept)."""

    def change(book: CustomerBook, tenant: str) -> Customer:
        try:
            return book.update(tenant, customer_id, email=email, name=name, locale=locale)
        except InvalidInput as exc:  # named as the option the user typed
            raise InvalidInput(f"--{exc.field}", exc.value, exc.allowed) from None

    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    found = _customer(
        place,
        change,
        lambda client: client.put_customer(customer_id, email=email, name=name, locale=locale),
    )
    _show(found, json)


__all__ = ["customers_app"]
