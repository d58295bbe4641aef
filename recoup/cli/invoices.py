"""`recoup invoices cancel`: stop dunning an invoice without a payment.

Contract:

    recoup invoices cancel INVOICE_ID --reason TEXT [--tenant T] [--db URL] [--schema S]
        [--json]
        → {"invoice_id", "state", "reason", "cancelled_attempts"}

The invoice ends `cancelled` (`invoice.dunning_cancelled`), its scheduled attempts are
cancelled and nothing is charged for it again; an attempt whose request already went out is
still heard. An invoice already recovered, exhausted or cancelled is left as it is (exit 0,
its state shown). No such invoice: exit 1. With `--url URL --token T` (or RECOUP_URL,
RECOUP_TOKEN) instead of `--db`, a remote `recoup serve` stops it, as `POST
/v1/dunning/invoices/{id}/cancel`; its refusals are one line, exit 2 (a 4xx) or 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from recoup.cli._app import JsonOption, SchemaOption, app, print_json
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
from recoup.dunning.invoice import AttemptState
from recoup.dunning.messages import STOP_REASON_MAX
from recoup.errors import InvalidInput

if TYPE_CHECKING:
    from recoup.wire.dunning import InvoiceOut

invoices_app = typer.Typer(help="Invoices in dunning: stop dunning one.", no_args_is_help=True)
app.add_typer(invoices_app, name="invoices")


@invoices_app.command("cancel")
def cancel_invoice(
    invoice_id: Annotated[str, typer.Argument(help="The invoice's id (the provider's).")],
    reason: Annotated[
        str,
        typer.Option(help=f"Why (1–{STOP_REASON_MAX} characters), stored and sent in the event."),
    ],
    tenant: TenantOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Stop dunning an invoice without a payment: nothing is charged for it again."""
    if not reason.strip() or len(reason) > STOP_REASON_MAX:
        raise InvalidInput("--reason", reason, f"expected 1 to {STOP_REASON_MAX} characters")
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    before, after = _stopped(place, invoice_id, reason)
    was = {a.attempt: a.state for a in before.attempts}
    cancelled = [
        a.attempt
        for a in after.attempts
        if a.state is AttemptState.CANCELLED and was.get(a.attempt) is not AttemptState.CANCELLED
    ]
    row = {
        "invoice_id": invoice_id,
        "state": str(after.state),
        "reason": after.reason,
        "cancelled_attempts": cancelled,
    }
    if json:
        print_json(row)
        return
    if after.state == before.state:  # already ended: a stop changes nothing
        typer.echo(f"invoice {invoice_id} is {after.state}: left as it is")
        return
    typer.echo(f"invoice {invoice_id}: dunning stopped ({reason})")
    typer.echo(f"cancelled attempts: {', '.join(map(str, cancelled)) or 'none'}")


def _stopped(place: Where, invoice_id: str, reason: str) -> tuple[InvoiceOut, InvoiceOut]:
    """The invoice before and after the stop, as the API answers it."""
    if place.remote:
        with opened_client(place) as (client, _):
            return client.get_invoice(invoice_id), client.cancel_invoice(invoice_id, reason=reason)
    from recoup.jobs.scheduler import Scheduler
    from recoup.recovery.service import Dunning
    from recoup.timekeeping.clock import SystemClock
    from recoup.wire.dunning import InvoiceOut

    with opened_store(place) as (store, tenant):
        dunning = Dunning(Scheduler(store, clock=SystemClock()), store)
        before = InvoiceOut.of(dunning.get(tenant, invoice_id))
        return before, InvoiceOut.of(dunning.stop(tenant, invoice_id, reason=reason))
