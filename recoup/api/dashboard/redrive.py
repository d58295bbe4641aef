"""The dashboard's bulk redrive of dead letters: a filter of the visitor's failed jobs (group,
name prefix, the time they failed, their last error), counted first (a dry run, shown with a
confirmation naming the count), then redriven by a POST carrying the session's CSRF token; each
step writes the audit line (`recoup.jobs.redrive.audit`, who: `dashboard:tenant=<tenant>`), as
POST /v1/jobs/redrive does."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import APIRouter, Request
from starlette.responses import Response

from recoup.api.dashboard.web import Acting, HtmlRoute, SignedIn, render, see_other, text_param
from recoup.api.deps import Api
from recoup.jobs.redrive import TEXT_MAX, FailedFilter
from recoup.timekeeping.instants import parse_instant

router = APIRouter(route_class=HtmlRoute, include_in_schema=False)

FIELDS = ("group", "name_prefix", "since", "until", "error")


def _search(values: Mapping[str, str | None]) -> dict[str, str]:
    return {name: text_param(name, values.get(name), max_length=TEXT_MAX) or "" for name in FIELDS}


def _filter(tenant: str, search: dict[str, str]) -> FailedFilter:
    return FailedFilter(
        tenant=tenant,
        group=search["group"] or None,
        name_prefix=search["name_prefix"] or None,
        since=parse_instant("since", search["since"]) if search["since"] else None,
        until=parse_instant("until", search["until"]) if search["until"] else None,
        error=search["error"] or None,
    )


def _who(tenant: str) -> str:
    return f"dashboard:tenant={tenant}"


@router.get("/redrive")
def redrive_page(
    request: Request,
    visitor: SignedIn,
    api: Api,
    group: str | None = None,
    name_prefix: str | None = None,
    since: str | None = None,
    until: str | None = None,
    error: str | None = None,
    count: str | None = None,
    redriven: str | None = None,
    matched: str | None = None,
) -> Response:
    """The filter; with `count`, how many failed jobs it names and a confirmation to redrive
    them; after a redrive, how many were."""
    given = {"group": group, "name_prefix": name_prefix, "since": since, "until": until}
    search = _search({**given, "error": error})
    counted = None
    if count is not None:
        found = _filter(visitor.tenant, search)
        counted = api.scheduler.redrive_failed(found, who=_who(visitor.tenant), dry_run=True)
    done = None
    if redriven is not None and matched is not None and redriven.isdigit() and matched.isdigit():
        done = {"redriven": int(redriven), "matched": int(matched)}
    return render(
        request,
        "redrive.html",
        {"visitor": visitor, "nav": "redrive", "search": search, "counted": counted, "done": done},
    )


@router.post("/redrive")
def redrive_jobs(action: Acting, api: Api) -> Response:
    """Redrive the failed jobs the confirmed filter names (as many as match now)."""
    search = _search(action.form)
    found = _filter(action.tenant, search)
    outcome = api.scheduler.redrive_failed(found, who=_who(action.tenant))
    return see_other(
        "/redrive", **search, redriven=str(outcome.redriven), matched=str(outcome.matched)
    )


__all__ = ["router"]
