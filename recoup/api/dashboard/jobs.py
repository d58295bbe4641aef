"""The dashboard's jobs and schedules: the job list (search by name, group, state; a cursor
per page), a job with its run log, cancelling it, and the schedules with their next
occurrences. Every read goes through the `Scheduler` the API uses, scoped to the visitor's
tenant."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from recoup.api.dashboard import actions
from recoup.api.dashboard.bulk import JOB_ACTIONS, bulk_done
from recoup.api.dashboard.live import jobs_running, refresh
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
from recoup.tenancy import ActionSubject

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
    bulk: str | None = None,
    changed: str | None = None,
    skipped: str | None = None,
    live: str | None = None,
) -> Response:
    """Jobs newest first; `name` matches the start of a job's name, `group` all of it. After a
    bulk action, what it did; while a listed job runs, the page refreshes itself."""
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
            "bulk": bulk_done(bulk, changed, skipped, JOB_ACTIONS),
            "refresh": refresh(request, live, jobs_running(page.jobs, now=api.clock.now())),
        },
    )


@router.get("/jobs/{job_id}")
def job_page(
    request: Request,
    visitor: SignedIn,
    api: Api,
    job_id: Id,
    notice: str | None = None,
    why: str | None = None,
    live: str | None = None,
) -> Response:
    """A job and its run log: every attempt, first first, and what operators did to it. While
    it runs or is about to, the page refreshes itself (unless `live=off`)."""
    job = api.scheduler.get(job_id, tenant=visitor.tenant)
    runs = api.scheduler.runs(job_id, tenant=visitor.tenant)
    done = api.services.tables.actions_on(visitor.tenant, ActionSubject.JOB, job_id)
    return render(
        request,
        "job.html",
        {
            "visitor": visitor,
            "nav": "jobs",
            "job": job,
            "log": run_log(job, runs, done),
            "started_at": started_at(runs),
            "finished_at": finished_at(job, runs),
            "notice": notice,
            "why": text_param("why", why, max_length=500) or "",
            "refresh": refresh(request, live, jobs_running([job], now=api.clock.now())),
        },
    )


@router.post("/jobs/{job_id}/cancel")
def cancel_job(action: Acting, api: Api, job_id: Id) -> Response:
    """Cancel a live job (a job that already ended stays as it is), as DELETE /v1/jobs/{id};
    the run log says who did it."""
    done = actions.cancel_job(api, action.visitor, job_id)
    return see_other(f"/jobs/{job_id}", notice="cancelled" if done.changed else "unchanged")


@router.post("/jobs/{job_id}/retry")
def retry_job(action: Acting, api: Api, job_id: Id) -> Response:
    """Schedule a job that failed for good again now, as POST /v1/jobs/{id}/retry; the run
    log says who did it. A job the scheduler will not retry is left as it is, and the page
    says why."""
    done = actions.retry_job(api, action.visitor, job_id)
    if done.changed:
        return see_other(f"/jobs/{job_id}", notice="retried")
    return see_other(f"/jobs/{job_id}", notice="refused", why=done.why)


@router.get("/schedules")
def schedules_page(request: Request, visitor: SignedIn, api: Api) -> Response:
    """The tenant's schedules, each with its next occurrences (paused ones too: what they
    would fire once resumed)."""
    schedules = api.services.list_schedules(visitor.tenant)
    rows = [(s, api.scheduler.upcoming(s, UPCOMING)) for s in schedules]
    return render(request, "schedules.html", {"visitor": visitor, "nav": "schedules", "rows": rows})


__all__ = ["router"]
