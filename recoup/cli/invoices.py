"""`recoup invoices show` and `recoup invoices cancel`: an invoice in dunning with its
attempts (and, under an adaptive policy, why each one is when it is), and stopping one.

Contract:

    recoup invoices show INVOICE_ID [--tenant T] [--db URL] [--schema S | --url URL
        --token T] [--json]
        → the invoice's state, policy and reason, then each attempt: number, due instant and
          the customer's local time, state, decline code, and its timing decision (arm,
          propensity, slot, explanation) when an adaptive policy placed it; `--json`:
          {"invoice_id", "state", "policy", "reason", "timezone", "attempts": [{"attempt",
          "at", "state", "decline_code", "advice_code", "timing": {"arm", "slot",
          "static_slot", "moved", "propensity", "explanation", "figures"} | null}]}
          (the timing as GET /v1/dunning/invoices/{id} gives it). No such invoice: exit 2.

    recoup invoices cancel INVOICE_ID --reason TEXT [--tenant T] [--db URL] [--schema S]
        [--json]
        → {"invoice_id", "state", "reason", "cancelled_attempts"}

The invoice ends `cancelled` (`invoice.dunning_cancelled`), its scheduled attempts are
cancelled and nothing is charged for it again; an attempt whose request already went out is
still heard. An invoice already recovered, exhausted or cancelled is left as it is (exit 0,
its state shown). No such invoice: exit 2, one line naming it, from either place. With
`--url URL --token T` (or RECOUP_URL, RECOUP_TOKEN) instead of `--db`, a remote `recoup
serve` stops it, as `POST /v1/dunning/invoices/{id}/cancel` (and `show` reads it, as `GET
/v1/dunning/invoices/{id}`); its refusals are one line, exit 2 (a 4xx) or 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from recoup.cli._app import JsonOption, SchemaOption, app, print_json
from recoup.cli._records import shown
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
from recoup.timekeeping.instants import format_utc

if TYPE_CHECKING:
    from recoup.wire.dunning import InvoiceOut, TimelineAttemptOut, TimelineOut

invoices_app = typer.Typer(
    help="Invoices in dunning: show one, stop dunning one.", no_args_is_help=True
)
app.add_typer(invoices_app, name="invoices")


@invoices_app.command("show")
def show_invoice(
    invoice_id: Annotated[str, typer.Argument(help="The invoice's id (the provider's).")],
    tenant: TenantOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """An invoice with its attempts, and why each one is when it is (learned timing)."""
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    invoice = _timeline(place, invoice_id)
    if json:
        print_json(
            {
                "invoice_id": invoice.invoice_id,
                "state": str(invoice.state),
                "policy": invoice.policy,
                "reason": invoice.reason,
                "timezone": invoice.timezone,
                "attempts": [_attempt_row(a) for a in invoice.attempts],
            }
        )
        return
    from recoup.timekeeping.zones import to_local

    say = typer.echo
    say(f"invoice {_clean(invoice.invoice_id)}: {invoice.state} (policy {_clean(invoice.policy)})")
    say(f"reason: {_clean(invoice.reason)}")
    for a in invoice.attempts:
        local = to_local(a.at, invoice.timezone)
        code = f" ({_clean(a.decline_code)})" if a.decline_code else ""
        say(
            f"attempt {a.attempt}: {a.at:%Y-%m-%d %H:%M} UTC, {local:%a %Y-%m-%d %H:%M} local, "
            f"{a.state}{code}"
        )
        if a.timing is not None:
            t = a.timing
            moved = f", moved from {t.static_slot}" if t.moved else ""
            say(f"  timing: {t.arm}, chosen with probability {t.propensity:.2f}{moved}")
            say(f"  why: {_clean(t.explanation)}")


def _timeline(place: Where, invoice_id: str) -> TimelineOut:
    """The invoice as GET /v1/dunning/invoices/{id} answers it, from either place, so both
    print alike; an unknown id is `NotFound` naming it (exit 2), from either."""
    if place.remote:
        with opened_client(place) as (client, _):
            return client.get_invoice(invoice_id)
    from recoup.jobs.scheduler import Scheduler
    from recoup.recovery.service import Dunning
    from recoup.timekeeping.clock import SystemClock
    from recoup.wire.dunning import TimelineOut

    with opened_store(place) as (store, tenant):
        dunning = Dunning(Scheduler(store, clock=SystemClock()), store)
        return TimelineOut.of_timeline(dunning.timeline(tenant, invoice_id))


def _attempt_row(a: TimelineAttemptOut) -> dict[str, Any]:
    return {
        "attempt": a.attempt,
        "at": format_utc(a.at),
        "state": str(a.state),
        "decline_code": a.decline_code,
        "advice_code": a.advice_code,
        "timing": None if a.timing is None else a.timing.model_dump(mode="json"),
    }


def _clean(text: str) -> str:
    """Control characters escaped (a stored text never moves the terminal's cursor)."""
    return shown(text).plain


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
