"""The /v1/jobs routes: create, list, read, cancel and retry (redrive) one-off jobs, and read
their run log."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from starlette.responses import Response

from recoup.api import operator_actions
from recoup.api.deps import Acting, Api, Post, Tenant
from recoup.api.fast_route import with_fast_path
from recoup.api.idempotent import json_response
from recoup.api.query_params import QueryFamily
from recoup.api.routes import job_creation
from recoup.api.routes.common import (
    CHECKED,
    ERRORS,
    NO_NUL,
    Cursor,
    ExactName,
    Id,
    Limit,
    RunCursor,
    link,
)
from recoup.api.trace_headers import Trace
from recoup.jobs.metadata import KEY_PATTERN, MAX_KEYS, MAX_VALUE_LENGTH
from recoup.jobs.model import JobState
from recoup.wire.schemas import (
    CancelIn,
    CancelledOut,
    ExactlyOne,
    JobIn,
    JobOut,
    JobPageOut,
    JobPatchIn,
    RunOut,
    RunsOut,
)
from recoup.wire.schemas.redrive import RedriveIn, RedriveOut

router = APIRouter(prefix="/v1", responses=ERRORS, tags=["jobs"], dependencies=CHECKED)

# `?metadata[key]=value`, repeatable with other keys: every pair must match.
METADATA_FILTER = QueryFamily(
    "metadata",
    description=(
        "`metadata[key]=value`: only items whose metadata holds that pair; several keys "
        "combine (every pair must match)."
    ),
    schema={
        "type": "object",
        "maxProperties": MAX_KEYS,
        "propertyNames": {"pattern": KEY_PATTERN},
        "additionalProperties": {
            "type": "string",
            "maxLength": MAX_VALUE_LENGTH,
            "pattern": NO_NUL,
        },
    },
)
MetadataFilter = Annotated[dict[str, str] | None, Depends(METADATA_FILTER)]


_JOB = {"job_id": "$response.body#/id"}
JOB_LINKS = {
    "GetJob": link("GET", "/v1/jobs/{job_id}", **_JOB),
    "CancelJob": link("DELETE", "/v1/jobs/{job_id}", **_JOB),
    "UpdateJob": link("PATCH", "/v1/jobs/{job_id}", **_JOB),
    "GetJobRuns": link("GET", "/v1/jobs/{job_id}/runs", **_JOB),
    "RetryJob": link("POST", "/v1/jobs/{job_id}/retry", **_JOB),
}


def create_job(body: JobIn, ctx: Post, api: Api, trace: Trace) -> Response:
    """Schedule a one-off job at `run_at` or after `delay_seconds`. With `idempotency_key`,
    at most one job of the tenant has that key: a second request answers the first job. A
    `traceparent` (and `tracestate`) header is stored with the job and sent on every delivery."""
    return job_creation.create(body, ctx, api, trace)


# As `@router.post` would declare it, with a fast path in front (`job_creation.fast_create`).
router.add_api_route(
    "/jobs",
    create_job,
    methods=["POST"],
    status_code=201,
    response_model=JobOut,
    responses={
        201: {"description": "The job.", "links": JOB_LINKS},
        200: {
            "description": "A job with this `idempotency_key` existed: that job, unchanged.",
            "model": JobOut,
            "links": JOB_LINKS,
        },
    },
    route_class_override=with_fast_path(job_creation.fast_create),
)


@router.get(
    "/jobs", response_model=JobPageOut, openapi_extra={"parameters": [METADATA_FILTER.openapi()]}
)
def list_jobs(
    api: Api,
    tenant: Tenant,
    metadata: MetadataFilter,
    state: JobState | None = None,
    name: ExactName = None,
    name_prefix: Annotated[str | None, Query(min_length=1, max_length=200, pattern=NO_NUL)] = None,
    group: Annotated[str | None, Query(min_length=1, max_length=200, pattern=NO_NUL)] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response:
    """Jobs of the tenant, newest first, a page at a time; `name` and `group` match exactly,
    `name_prefix` by prefix, `metadata[key]=value` each pair; filters combine."""
    page = api.scheduler.list_jobs(
        tenant=tenant,
        state=state,
        name=name,
        name_prefix=name_prefix,
        group=group,
        metadata=metadata,
        limit=limit,
        cursor=cursor,
    )
    return json_response(
        200,
        JobPageOut(
            jobs=[JobOut.of(j, now=api.clock.now()) for j in page.jobs],
            next_cursor=page.next_cursor,
        ),
    )


@router.post("/jobs/cancel", response_model=CancelledOut)
def cancel_jobs(body: CancelIn, ctx: Post, api: Api) -> Response:
    """Cancel the live job named `name`, every live job whose name starts with
    `name_prefix`, or every live job of exactly `group`."""
    given = [body.name, body.name_prefix, body.group]
    if sum(value is not None for value in given) != 1:
        raise ExactlyOne("name", "name_prefix", "group")
    scheduler = api.scheduler
    if body.group is not None:
        group = body.group
        return ctx.run(
            200, lambda: CancelledOut(cancelled=scheduler.cancel_group(group, tenant=ctx.tenant))
        )
    if body.name is not None:
        name = body.name
        return ctx.run(
            200, lambda: CancelledOut(cancelled=scheduler.cancel_by_name(name, tenant=ctx.tenant))
        )
    prefix = body.name_prefix
    assert prefix is not None
    return ctx.run(
        200, lambda: CancelledOut(cancelled=scheduler.cancel_by_prefix(prefix, tenant=ctx.tenant))
    )


@router.post("/jobs/redrive", response_model=RedriveOut)
def redrive_jobs(body: RedriveIn, ctx: Post, api: Api) -> Response:
    """Redrive the failed jobs the filter names (each scheduled again now with the budget of
    attempts it was created with), or with `dry_run` only count them: count first, then
    redrive. Each call writes an audit line (who, when, the filter, how many)."""
    found = body.filter_for(ctx.tenant)
    scheduler = api.scheduler

    def run() -> RedriveOut:
        who = f"api:tenant={ctx.tenant}"
        outcome = scheduler.redrive_failed(found, who=who, dry_run=body.dry_run)
        return RedriveOut.of(outcome, found)

    return ctx.run(200, run)


@router.get("/jobs/{job_id}", response_model=JobOut)
def get_job(tenant: Tenant, job_id: Id, api: Api) -> Response:
    job = api.scheduler.get(job_id, tenant=tenant)
    return json_response(200, JobOut.of(job, now=api.clock.now()))


@router.patch(
    "/jobs/{job_id}",
    response_model=JobOut,
    responses={409: {"description": "The job has started or ended (its state in the detail)."}},
)
def update_job(tenant: Tenant, job_id: Id, body: JobPatchIn, api: Api) -> Response:
    """Change a job that is scheduled and has not started: only the fields given change
    (`metadata` merges; a key set to null is removed). 409 once a worker has claimed it or it
    has ended: the state check and the change are one transaction, so a claim at the same
    moment either runs the changed job or makes this a 409."""
    change = body.change(api.clock.now())
    return json_response(200, JobOut.of(api.scheduler.update_job(job_id, change, tenant=tenant)))


@router.delete("/jobs/{job_id}", response_model=JobOut)
def cancel_job(job_id: Id, api: Api, by: Acting) -> Response:
    """Cancel a job. Idempotent: a job that already ended is returned as it is. A cancel that
    changed the job is recorded with the token that asked (its run log shows it)."""
    return json_response(200, JobOut.of(operator_actions.cancel_job(api, by, job_id).value))


@router.post("/jobs/{job_id}/retry", response_model=JobOut)
def retry_job(job_id: Id, ctx: Post, api: Api, by: Acting) -> Response:
    """Redrive a job that failed for good (a dead letter, `GET /v1/jobs?state=failed`):
    scheduled again now with a fresh budget of attempts (as many again as it had, up to 100
    in all), its run log kept. 409 unless it failed, or when it has made 100 attempts or a
    live job holds its name. Recorded with the token that asked, in the same transaction."""
    return ctx.run(200, lambda: JobOut.of(operator_actions.retry_job(api, by, job_id)))


@router.get("/jobs/{job_id}/runs", response_model=RunsOut)
def job_runs(
    tenant: Tenant, job_id: Id, api: Api, limit: Limit = 50, cursor: RunCursor = None
) -> Response:
    """The job's attempts, first first, a page at a time (404 for an unknown job, not an
    empty log)."""
    page = api.scheduler.list_runs(job_id, tenant=tenant, limit=limit, cursor=cursor)
    return json_response(
        200, RunsOut(runs=[RunOut.of(r) for r in page.runs], next_cursor=page.next_cursor)
    )


__all__ = ["router"]
