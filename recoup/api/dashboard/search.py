"""The dashboard's search box (in every page's header): one text that may be an invoice id, a
job id, a job's name (or the start of one) or a customer id. An exact invoice id or job id
lands on its page; otherwise the page lists the job of exactly that name, the jobs whose name
starts with it and the customer's invoices, and lands on the one result when there is only
one. Every read is the tenant's own, through the services the /v1 routes use: another
tenant's id finds nothing, as it is a 404 in the API."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from starlette.responses import Response

from recoup.api.dashboard.web import HtmlRoute, SignedIn, render, see_other, text_param
from recoup.api.deps import Api
from recoup.errors import NotFound
from recoup.jobs.model import Job
from recoup.recovery.store import InvoiceFilter

router = APIRouter(route_class=HtmlRoute, include_in_schema=False)

SHOWN = 20  # results of each kind on the page
MAX_QUERY = 200  # characters of a search


def job_path(job_id: str) -> str:
    return f"/jobs/{quote(job_id, safe='')}"


def invoice_path(invoice_id: str) -> str:
    return f"/invoices/{quote(invoice_id, safe='')}"


@router.get("/search")
def search_page(request: Request, visitor: SignedIn, api: Api, q: str | None = None) -> Response:
    """The thing `q` names, or what it may name."""
    text = text_param("q", q, max_length=MAX_QUERY)
    context = {"visitor": visitor, "nav": "", "q": text or "", "jobs": [], "invoices": []}
    if text is None:
        return render(request, "search.html", context)
    tenant = visitor.tenant
    if api.dunning.store.get_invoice(tenant, text) is not None:
        return see_other(invoice_path(text))
    try:
        return see_other(job_path(api.scheduler.get(text, tenant=tenant).id))
    except NotFound:
        pass
    jobs: list[Job] = []
    try:
        jobs.append(api.scheduler.get_by_name(text, tenant=tenant))
    except NotFound:
        pass
    named = api.scheduler.list_jobs(tenant=tenant, name_prefix=text, limit=SHOWN).jobs
    jobs += [job for job in named if all(job.id != j.id for j in jobs)]
    invoices = api.dunning.list_invoices(
        InvoiceFilter(tenant=tenant, customer_id=text[:100], limit=SHOWN)
    ).invoices
    if len(jobs) + len(invoices) == 1:
        return see_other(job_path(jobs[0].id) if jobs else invoice_path(invoices[0].invoice_id))
    return render(request, "search.html", {**context, "jobs": jobs, "invoices": invoices})


__all__ = ["invoice_path", "job_path", "router"]
