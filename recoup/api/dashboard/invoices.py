"""The dashboard's invoices in dunning: the list (by state and customer, a cursor per page) with
the totals of a period (recovered, at risk, lost, by currency: the recovery report's sums), an
invoice's timeline (its attempts with their run logs, its emails with theirs, its events: what
GET /v1/dunning/invoices/{id} returns, and what operators did), marking it paid and stopping
its dunning (`actions.py`, recorded with who did it). Every call goes through
`recoup.recovery.Dunning`, scoped to the visitor's tenant."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Request
from starlette.responses import Response

from recoup.api.dashboard import actions
from recoup.api.dashboard.bulk import INVOICE_ACTIONS, bulk_done
from recoup.api.dashboard.live import invoices_running, refresh
from recoup.api.dashboard.web import (
    Acting,
    HtmlRoute,
    SignedIn,
    choice_param,
    render,
    see_other,
    text_param,
)
from recoup.api.dashboard.wording import (
    action_sentence,
    attempt_runs,
    attempts_made,
    not_run_words,
)
from recoup.api.deps import Api
from recoup.api.routes.common import Id
from recoup.api.state import ApiState
from recoup.dunning.invoice import InvoiceState
from recoup.dunning.messages import STOP_REASON_MAX
from recoup.errors import InvalidInput
from recoup.recovery.reporting import Reports, ReportWindow
from recoup.recovery.store import InvoiceFilter
from recoup.tenancy import ActionSubject

router = APIRouter(route_class=HtmlRoute, include_in_schema=False)

PAGE = 50  # invoices per page
PERIODS = ("7", "30", "90", "365")  # days of the totals one may choose


def period_param(value: str | None) -> int | None:
    """The period of the totals, in days back from now; None: the recovery report's window."""
    if not value:
        return None
    if value not in PERIODS:
        raise InvalidInput("days", value, f"expected one of {', '.join(PERIODS)}")
    return int(value)


def money_window(api: ApiState, tenant: str, days: int | None) -> ReportWindow:
    """The window of the totals: the recovery report's (as GET /v1/dunning/report with no
    `since`) or the last `days` days."""
    reports = Reports(api.dunning.store, api.clock)
    options = reports.options(tenant)
    since = None if days is None else options.now - timedelta(days=days)
    return reports.window(options, since=since)


@router.get("/invoices")
def invoices_page(
    request: Request,
    visitor: SignedIn,
    api: Api,
    state: str | None = None,
    customer: str | None = None,
    cursor: str | None = None,
    days: str | None = None,
    bulk: str | None = None,
    changed: str | None = None,
    skipped: str | None = None,
    live: str | None = None,
) -> Response:
    """Invoices in dunning, oldest first, as GET /v1/dunning/invoices lists them, with the
    totals of the period (recovered, at risk, lost, by currency) and the bulk actions over the
    filter."""
    chosen = choice_param("state", state, InvoiceState)
    customer_id = text_param("customer", customer, max_length=100)
    period = period_param(days)
    window = money_window(api, visitor.tenant, period)
    money = Reports(api.dunning.store, api.clock).money(visitor.tenant, window)
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
            "money": money,
            "window": window,
            "days": str(period or ""),
            "periods": PERIODS,
            "bulk": bulk_done(bulk, changed, skipped, INVOICE_ACTIONS),
            "refresh": refresh(request, live, invoices_running(page.invoices, now=api.clock.now())),
        },
    )


@router.get("/invoices/{invoice_id}")
def invoice_page(
    request: Request,
    visitor: SignedIn,
    api: Api,
    invoice_id: Id,
    notice: str | None = None,
    live: str | None = None,
) -> Response:
    """An invoice's timeline: its attempts, emails, events, and what operators did to it."""
    timeline = api.dunning.timeline(visitor.tenant, invoice_id)
    done = api.services.tables.actions_on(visitor.tenant, ActionSubject.INVOICE, invoice_id)
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
            "actions": [(a, action_sentence(a)) for a in done],
            "refresh": refresh(
                request, live, invoices_running([timeline.invoice], now=api.clock.now())
            ),
        },
    )


@router.post("/invoices/{invoice_id}/paid")
def mark_paid(action: Acting, api: Api, invoice_id: Id) -> Response:
    """Paid out of band: the remaining attempts are cancelled (as POST
    /v1/dunning/invoices/{id}/paid)."""
    done = actions.mark_paid(api, action.visitor, invoice_id)
    return see_other(f"/invoices/{invoice_id}", notice="paid" if done.changed else "unchanged")


@router.post("/invoices/{invoice_id}/cancel")
def stop_dunning(action: Acting, api: Api, invoice_id: Id) -> Response:
    """Stop dunning without a payment (as POST /v1/dunning/invoices/{id}/cancel)."""
    reason = text_param("reason", action.form.get("reason"), max_length=STOP_REASON_MAX)
    if reason is None:
        raise InvalidInput("reason", "", f"expected 1–{STOP_REASON_MAX} characters")
    done = actions.stop_invoice(api, action.visitor, invoice_id, reason=reason)
    return see_other(f"/invoices/{invoice_id}", notice="cancelled" if done.changed else "unchanged")


__all__ = ["router"]
