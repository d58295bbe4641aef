"""The dashboard's jobs and schedules: the job list (search by name, group, state; a cursor
per page), a job with its run log, cancelling it, and the schedules with their next
occurrences. Every read goes through the `Scheduler` the API uses, scoped to the visitor's
tenant."""

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
from recoup.api.dashboard.wording import finished_at, run_log, shown_error, started_at
from recoup.api.deps import Api
from recoup.api.routes.common import Id
from recoup.jobs.model import JobState

router = APIRouter(route_class=HtmlRoute, include_in_schema=False)

PAGE = 50  # jobs per page
UPCOMING = 5  # occurrences shown per schedule


@router.get("/jobs")
def jobs_page(
    request: Request,
    visitor: SignedIn,
    api: Api,
    name: str | None = None,
    group: str | None = None,
    state: str | None = None,
    schedule: str | None = None,
    cursor: str | None = None,
) -> Response:
    """Jobs newest first; `name` matches the start of a job's name, `group` all of it."""
    search = {
        "name": text_param("name", name) or "",
        "group": text_param("group", group) or "",
        "state": (choice_param("state", state, JobState) or ""),
        "schedule": text_param("schedule", schedule, max_length=100) or "",
    }
    page = api.scheduler.list_jobs(
        tenant=visitor.tenant,
        state=JobState(search["state"]) if search["state"] else None,
        name_prefix=search["name"] or None,
        group=search["group"] or None,
        schedule_id=search["schedule"] or None,
        limit=PAGE,
        cursor=text_param("cursor", cursor, max_length=500),
    )
    return render(
        request,
        "jobs.html",
        {
            "visitor": visitor,
            "nav": "jobs",
            "jobs": page.jobs,
            "errors": {job.id: shown_error(job) for job in page.jobs},
            "search": search,
            "states": [s.value for s in JobState],
            "next_cursor": page.next_cursor,
            "paged": bool(cursor),
        },
    )


@router.get("/jobs/{job_id}")
def job_page(
    request: Request, visitor: SignedIn, api: Api, job_id: Id, notice: str | None = None
) -> Response:
    """A job and its run log: every attempt, first first."""
    job = api.scheduler.get(job_id, tenant=visitor.tenant)
    runs = api.scheduler.runs(job_id, tenant=visitor.tenant)
    return render(
        request,
        "job.html",
        {
            "visitor": visitor,
            "nav": "jobs",
            "job": job,
            "log": run_log(job, runs),
            "started_at": started_at(runs),
            "finished_at": finished_at(job, runs),
            "notice": notice,
        },
    )


@router.post("/jobs/{job_id}/cancel")
def cancel_job(action: Acting, api: Api, job_id: Id) -> Response:
    """Cancel a live job (a job that already ended stays as it is), as DELETE /v1/jobs/{id}."""
    job = api.scheduler.cancel(job_id, tenant=action.tenant)
    return see_other(f"/jobs/{job.id}", notice="cancelled")


@router.get("/schedules")
def schedules_page(request: Request, visitor: SignedIn, api: Api) -> Response:
    """The tenant's schedules, each with its next occurrences (paused ones too: what they
    would fire once resumed)."""
    schedules = api.services.list_schedules(visitor.tenant)
    rows = [(s, api.scheduler.upcoming(s, UPCOMING)) for s in schedules]
    return render(request, "schedules.html", {"visitor": visitor, "nav": "schedules", "rows": rows})


__all__ = ["router"]
