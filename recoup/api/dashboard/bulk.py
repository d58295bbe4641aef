"""Bulk actions over a filtered list: retry or cancel the jobs the jobs page's filter names,
stop or mark paid the invoices the invoices page's filter names.

Two steps, as the redrive page: a GET counts what the action would change (failed jobs for a
retry, live jobs for a cancel, invoices still in dunning for a stop or a payment) and shows a
confirmation naming the count; its POST, with the session's CSRF token, acts on each item
through the same one-item action as the item's own page (`actions.py`: the services the /v1
routes call, one `OperatorAction` per item naming who did it and the bulk action). The POST
acts on what matches when it runs, at most `BULK_MAX` items; a filter naming more asks to be
narrowed. What changed meanwhile (a job that ended on its own) is counted as skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from fastapi import APIRouter, Request
from starlette.responses import Response

from recoup.api.dashboard import actions
from recoup.api.dashboard.web import (
    Acting,
    HtmlRoute,
    SignedIn,
    Visitor,
    choice_param,
    render,
    see_other,
    text_param,
)
from recoup.api.deps import Api
from recoup.api.state import ApiState
from recoup.dunning.invoice import InvoiceState
from recoup.dunning.messages import STOP_REASON_MAX
from recoup.errors import InvalidInput
from recoup.jobs.model import JobState
from recoup.recovery.store import InvoiceFilter

router = APIRouter(route_class=HtmlRoute, include_in_schema=False)

BULK_MAX = 500  # items one bulk action acts on at most
SCAN_PAGE = 100  # items read per page while counting

JOB_ACTIONS = {"retry": "Retry", "cancel": "Cancel"}
INVOICE_ACTIONS = {"stop": "Stop dunning", "paid": "Mark paid"}
# The states an action can change: a retry takes a job that failed for good, a cancel a live
# one; an invoice is stopped or paid while it is still in dunning.
JOB_STATES = {"retry": (JobState.FAILED,), "cancel": (JobState.SCHEDULED, JobState.RUNNING)}
OPEN_INVOICES = tuple(s for s in InvoiceState if not s.is_final)


def _action(value: str | None, allowed: Mapping[str, str]) -> str:
    if value is None or value not in allowed:
        raise InvalidInput("action", value, f"expected one of {', '.join(allowed)}")
    return value


@dataclass(frozen=True, kw_only=True)
class JobSearch:
    """The jobs page's filter, as its fields are named there."""

    name: str
    group: str
    state: str
    schedule: str

    @classmethod
    def read(cls, values: Mapping[str, str | None]) -> JobSearch:
        state = choice_param("state", values.get("state"), JobState)
        return cls(
            name=text_param("name", values.get("name")) or "",
            group=text_param("group", values.get("group")) or "",
            state=state.value if state else "",
            schedule=text_param("schedule", values.get("schedule"), max_length=100) or "",
        )

    def fields(self) -> dict[str, str]:
        return {
            "name": self.name,
            "group": self.group,
            "state": self.state,
            "schedule": self.schedule,
        }

    def words(self) -> str:
        said = [f"name starts with {self.name!r}"] if self.name else []
        said += [f"group {self.group!r}"] if self.group else []
        said += [f"state {self.state}"] if self.state else []
        said += [f"schedule {self.schedule!r}"] if self.schedule else []
        return ", ".join(said) or "every job"


@dataclass(frozen=True, kw_only=True)
class InvoiceSearch:
    """The invoices page's filter, as its fields are named there."""

    state: str
    customer: str

    @classmethod
    def read(cls, values: Mapping[str, str | None]) -> InvoiceSearch:
        state = choice_param("state", values.get("state"), InvoiceState)
        return cls(
            state=state.value if state else "",
            customer=text_param("customer", values.get("customer"), max_length=100) or "",
        )

    def fields(self) -> dict[str, str]:
        return {"state": self.state, "customer": self.customer}

    def words(self) -> str:
        said = [f"state {self.state}"] if self.state else []
        said += [f"customer {self.customer!r}"] if self.customer else []
        return ", ".join(said) or "every invoice"


def bulk_done(
    bulk: str | None, changed: str | None, skipped: str | None, labels: Mapping[str, str]
) -> dict[str, str | int] | None:
    """What a list page says after a bulk action (its redirect's `bulk`, `changed` and
    `skipped`); None when there was none, or the address was altered."""
    if bulk not in labels or not (changed or "").isdigit() or not (skipped or "").isdigit():
        return None
    assert bulk is not None and changed is not None and skipped is not None
    return {"label": labels[bulk], "changed": int(changed), "skipped": int(skipped)}


def matching_jobs(api: ApiState, tenant: str, search: JobSearch, action: str) -> Iterator[str]:
    """The ids of the jobs the filter names that `action` can change, newest first."""
    states = [s for s in JOB_STATES[action] if not search.state or s.value == search.state]
    for state in states:
        cursor = None
        while True:
            page = api.scheduler.list_jobs(
                tenant=tenant,
                state=state,
                name_prefix=search.name or None,
                group=search.group or None,
                schedule_id=search.schedule or None,
                limit=SCAN_PAGE,
                cursor=cursor,
            )
            yield from (job.id for job in page.jobs)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor


def matching_invoices(api: ApiState, tenant: str, search: InvoiceSearch) -> Iterator[str]:
    """The ids of the invoices the filter names that are still in dunning, oldest first."""
    states = [s for s in OPEN_INVOICES if not search.state or s.value == search.state]
    for state in states:
        cursor = None
        while True:
            page = api.dunning.list_invoices(
                InvoiceFilter(
                    tenant=tenant,
                    state=state,
                    customer_id=search.customer or None,
                    limit=SCAN_PAGE,
                    cursor=cursor,
                )
            )
            yield from (invoice.invoice_id for invoice in page.invoices)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor


def _first(ids: Iterator[str]) -> list[str]:
    """Up to one more than `BULK_MAX` ids: enough to tell a filter that names too many."""
    found: list[str] = []
    for item in ids:
        found.append(item)
        if len(found) > BULK_MAX:
            break
    return found


class _Search(Protocol):
    def fields(self) -> dict[str, str]: ...

    def words(self) -> str: ...


@dataclass(frozen=True)
class _Kind:
    """What a bulk action is over: `nav` names its list page (and its form's address)."""

    nav: str  # "jobs" or "invoices"
    labels: Mapping[str, str]


_JOBS = _Kind("jobs", JOB_ACTIONS)
_INVOICES = _Kind("invoices", INVOICE_ACTIONS)


def _confirmation(
    request: Request,
    visitor: Visitor,
    kind: _Kind,
    chosen: str,
    search: _Search,
    ids: Iterator[str],
) -> Response:
    """How many of `ids` (the filter's matches) the action would change, and the form that
    confirms it; too many to act on at once is said on the page."""
    count = len(_first(ids))
    return render(
        request,
        "bulk.html",
        {
            "visitor": visitor,
            "nav": kind.nav,
            "post": f"/bulk/{kind.nav}",
            "label": kind.labels[chosen],
            "action": chosen,
            "count": count,
            "too_many": count > BULK_MAX,
            "most": BULK_MAX,
            "words": search.words(),
            "fields": search.fields(),
            "back": f"/{kind.nav}",
            "noun": kind.nav[:-1],
        },
    )


def _carried_out(
    kind: _Kind,
    chosen: str,
    search: _Search,
    ids: Iterator[str],
    act: Callable[[str, str], actions.Done],
) -> Response:
    """`act(id, detail)` on each match of the confirmed filter (refused whole when it names
    more than `BULK_MAX`), then back to the list, which says how many changed."""
    found = _first(ids)
    if len(found) > BULK_MAX:
        raise InvalidInput(
            "filter", f"more than {BULK_MAX} match", f"expected at most {BULK_MAX}: narrow it"
        )
    detail = f"bulk {chosen} of {len(found)} {kind.nav[:-1]}(s): {search.words()}"
    changed = sum(1 for item in found if act(item, detail).changed)
    skipped = len(found) - changed
    return see_other(
        f"/{kind.nav}", **search.fields(), bulk=chosen, changed=str(changed), skipped=str(skipped)
    )


@router.get("/bulk/jobs")
def confirm_jobs(
    request: Request,
    visitor: SignedIn,
    api: Api,
    action: str | None = None,
    name: str | None = None,
    group: str | None = None,
    state: str | None = None,
    schedule: str | None = None,
) -> Response:
    """How many jobs the filter names that the action can change, and a confirmation."""
    chosen = _action(action, JOB_ACTIONS)
    search = JobSearch.read({"name": name, "group": group, "state": state, "schedule": schedule})
    ids = matching_jobs(api, visitor.tenant, search, chosen)
    return _confirmation(request, visitor, _JOBS, chosen, search, ids)


@router.post("/bulk/jobs")
def bulk_jobs(action: Acting, api: Api) -> Response:
    """Retry or cancel each job the confirmed filter names now."""
    chosen = _action(action.form.get("action"), JOB_ACTIONS)
    search = JobSearch.read(action.form)
    act = actions.retry_job if chosen == "retry" else actions.cancel_job
    return _carried_out(
        _JOBS,
        chosen,
        search,
        matching_jobs(api, action.tenant, search, chosen),
        lambda job_id, detail: act(api, action.visitor, job_id, detail=detail),
    )


@router.get("/bulk/invoices")
def confirm_invoices(
    request: Request,
    visitor: SignedIn,
    api: Api,
    action: str | None = None,
    state: str | None = None,
    customer: str | None = None,
) -> Response:
    """How many invoices still in dunning the filter names, and a confirmation."""
    chosen = _action(action, INVOICE_ACTIONS)
    search = InvoiceSearch.read({"state": state, "customer": customer})
    ids = matching_invoices(api, visitor.tenant, search)
    return _confirmation(request, visitor, _INVOICES, chosen, search, ids)


@router.post("/bulk/invoices")
def bulk_invoices(action: Acting, api: Api) -> Response:
    """Stop the dunning of, or mark paid, each invoice the confirmed filter names now."""
    chosen = _action(action.form.get("action"), INVOICE_ACTIONS)
    search = InvoiceSearch.read(action.form)
    reason = None
    if chosen == "stop":
        reason = text_param("reason", action.form.get("reason"), max_length=STOP_REASON_MAX)
        if reason is None:
            raise InvalidInput("reason", "", f"expected 1–{STOP_REASON_MAX} characters")
    visitor = action.visitor

    def act(invoice_id: str, detail: str) -> actions.Done:
        if reason is not None:
            return actions.stop_invoice(api, visitor, invoice_id, reason=reason, detail=detail)
        return actions.mark_paid(api, visitor, invoice_id, detail=detail)

    ids = matching_invoices(api, action.tenant, search)
    return _carried_out(_INVOICES, chosen, search, ids, act)


__all__ = ["BULK_MAX", "INVOICE_ACTIONS", "JOB_ACTIONS", "bulk_done", "router"]
