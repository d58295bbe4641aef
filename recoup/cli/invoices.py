"""`recoup invoices cancel`: stop dunning an invoice without a payment.

Contract:

    recoup invoices cancel INVOICE_ID --reason TEXT [--tenant T] [--db URL] [--schema S]
        [--json]
        → {"invoice_id", "state", "reason", "cancelled_attempts"}

The invoice ends `cancelled` (`invoice.dunning_cancelled`), its scheduled attempts are
cancelled and nothing is charged for it again; an attempt whose request already went out is
still heard. An invoice already recovered, exhausted or cancelled is left as it is (exit 0,
its state shown). No such invoice: exit 1.
"""

from __future__ import annotations

from typing import Annotated

import typer

from recoup.cli._app import DbOption, JsonOption, SchemaOption, app, print_json, store_options
from recoup.cli._records import TenantOption
from recoup.dunning.invoice import AttemptState
from recoup.dunning.messages import STOP_REASON_MAX
from recoup.errors import InvalidInput, NotFound
from recoup.jobs.model import DEFAULT_TENANT

invoices_app = typer.Typer(help="Invoices in dunning: stop dunning one.", no_args_is_help=True)
app.add_typer(invoices_app, name="invoices")


@invoices_app.command("cancel")
def cancel_invoice(
    invoice_id: Annotated[str, typer.Argument(help="The invoice's id (the provider's).")],
    reason: Annotated[
        str,
        typer.Option(help=f"Why (1–{STOP_REASON_MAX} characters), stored and sent in the event."),
    ],
    tenant: TenantOption = DEFAULT_TENANT,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Stop dunning an invoice without a payment: nothing is charged for it again."""
    from recoup.jobs.scheduler import Scheduler
    from recoup.recovery.service import Dunning
    from recoup.storage import open_store
    from recoup.timekeeping.clock import SystemClock

    if not reason.strip() or len(reason) > STOP_REASON_MAX:
        raise InvalidInput("--reason", reason, f"expected 1 to {STOP_REASON_MAX} characters")
    store = open_store(db, **store_options(schema, db))
    try:
        if tenant != DEFAULT_TENANT and store.get_tenant(tenant) is None:
            raise NotFound(f"no tenant {tenant!r}; `recoup tenants list` shows them")
        dunning = Dunning(Scheduler(store, clock=SystemClock()), store)
        before = dunning.get(tenant, invoice_id)
        after = dunning.stop(tenant, invoice_id, reason=reason)
    finally:
        store.close()
    cancelled = [
        a.attempt
        for a in after.attempts
        if a.state is AttemptState.CANCELLED and before.attempt(a.attempt) != a
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
    if after.version == before.version:
        typer.echo(f"invoice {invoice_id} is {after.state}: left as it is")
        return
    typer.echo(f"invoice {invoice_id}: dunning stopped ({reason})")
    typer.echo(f"cancelled attempts: {', '.join(map(str, cancelled)) or 'none'}")
