"""The dashboard's invoices in dunning: the list (by state, a cursor per page), an invoice's
timeline (its attempts with their run logs, its emails with theirs, and its events: what GET
/v1/dunning/invoices/{id} returns) and marking it paid. Every call goes through
`recoup.recovery.Dunning`, scoped to the visitor's tenant."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from recoup.api.dashboard.web import (
    Acting,
    HtmlRoute,
    SignedIn,
    choice_param,
    render,
    see_other,
    text_param,
)
from recoup.api.dashboard.wording import attempt_runs, attempts_made, not_run_words
from recoup.api.deps import Api
from recoup.api.routes.common import Id
from recoup.dunning.invoice import InvoiceState
from recoup.dunning.messages import STOP_REASON_MAX
from recoup.errors import InvalidInput
from recoup.recovery.store import InvoiceFilter

router = APIRouter(route_class=HtmlRoute, include_in_schema=False)

PAGE = 50  # invoices per page


@router.get("/invoices")
def invoices_page(
    request: Request,
    visitor: SignedIn,
    api: Api,
    state: str | None = None,
    customer: str | None = None,
    cursor: str | None = None,
) -> Response:
    """Invoices in dunning, oldest first, as GET /v1/dunning/invoices lists them."""
    chosen = choice_param("state", state, InvoiceState)
    customer_id = text_param("customer", customer, max_length=100)
    page = api.dunning.list_invoices(
        InvoiceFilter(
            tenant=visitor.tenant,
            state=chosen,
            customer_id=customer_id,
            limit=PAGE,
            cursor=text_param("cursor", cursor, max_length=500),
        )
    )
    return render(
        request,
        "invoices.html",
        {
            "visitor": visitor,
            "nav": "invoices",
            "invoices": page.invoices,
            "made": {i.invoice_id: attempts_made(i) for i in page.invoices},
            "search": {"state": chosen.value if chosen else "", "customer": customer_id or ""},
            "states": [s.value for s in InvoiceState],
            "next_cursor": page.next_cursor,
            "paged": bool(cursor),
        },
    )


@router.get("/invoices/{invoice_id}")
def invoice_page(
    request: Request, visitor: SignedIn, api: Api, invoice_id: Id, notice: str | None = None
) -> Response:
    timeline = api.dunning.timeline(visitor.tenant, invoice_id)
    return render(
        request,
        "invoice.html",
        {
            "visitor": visitor,
            "nav": "invoices",
            "invoice": timeline.invoice,
            "told": attempt_runs(timeline.invoice, timeline.runs),
            "not_run": not_run_words,
            "events": timeline.events,
            "emails": timeline.emails,
            "email_runs": timeline.email_runs,
            "notice": notice,
        },
    )


@router.post("/invoices/{invoice_id}/paid")
def mark_paid(action: Acting, api: Api, invoice_id: Id) -> Response:
    """Paid out of band: the remaining attempts are cancelled (as POST
    /v1/dunning/invoices/{id}/paid)."""
    invoice = api.dunning.mark_paid(action.tenant, invoice_id)
    return see_other(f"/invoices/{invoice.invoice_id}", notice="paid")


@router.post("/invoices/{invoice_id}/cancel")
def stop_dunning(action: Acting, api: Api, invoice_id: Id) -> Response:
    """Stop dunning without a payment (as POST /v1/dunning/invoices/{id}/cancel)."""
    reason = text_param("reason", action.form.get("reason"), max_length=STOP_REASON_MAX)
    if reason is None:
        raise InvalidInput("reason", "", f"expected 1–{STOP_REASON_MAX} characters")
    invoice = api.dunning.stop(action.tenant, invoice_id, reason=reason)
    return see_other(f"/invoices/{invoice.invoice_id}", notice="cancelled")


__all__ = ["router"]
