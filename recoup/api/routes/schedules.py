"""The /v1/schedules routes: create, list, read, delete, pause and resume recurring schedules."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from starlette.responses import Response

from recoup.api.deps import Api, Post, Tenant
from recoup.api.idempotent import PostContext, json_response
from recoup.api.problems import Problem
from recoup.api.routes.common import CHECKED, ERRORS, ExactName, Id, Limit, ScheduleCursor, link
from recoup.api.routes.jobs import METADATA_FILTER, MetadataFilter
from recoup.api.state import ApiState
from recoup.api.trace_headers import Trace, traced_schedule
from recoup.errors import NotFound
from recoup.jobs.changes import Unset
from recoup.jobs.model import new_id
from recoup.jobs.schedules.model import MissedPolicy, NewSchedule
from recoup.wire.schemas import (
    ScheduleIn,
    ScheduleListOut,
    ScheduleOut,
    SchedulePatchIn,
    ScheduleState,
    UpcomingOut,
)

router = APIRouter(prefix="/v1", responses=ERRORS, tags=["schedules"], dependencies=CHECKED)


_SCHEDULE = {"schedule_id": "$response.body#/id"}
SCHEDULE_LINKS = {
    "GetSchedule": link("GET", "/v1/schedules/{schedule_id}", **_SCHEDULE),
    "DeleteSchedule": link("DELETE", "/v1/schedules/{schedule_id}", **_SCHEDULE),
    "PauseSchedule": link("POST", "/v1/schedules/{schedule_id}/pause", **_SCHEDULE),
    "UpdateSchedule": link("PATCH", "/v1/schedules/{schedule_id}", **_SCHEDULE),
    "ResumeSchedule": link("POST", "/v1/schedules/{schedule_id}/resume", **_SCHEDULE),
    "UpcomingOfSchedule": link("GET", "/v1/schedules/{schedule_id}/upcoming", **_SCHEDULE),
}


@router.post(
    "/schedules",
    status_code=201,
    response_model=ScheduleOut,
    responses={201: {"description": "The schedule.", "links": SCHEDULE_LINKS}},
)
def create_schedule(body: ScheduleIn, ctx: Post, api: Api, trace: Trace) -> Response:
    """A recurring schedule: `cron` in `timezone`, or a billing `anchor`. A `traceparent` (and
    `tracestate`) header is stored with the schedule and given to every job it fires."""
    rule = body.rule()
    api.services.check_rule(rule)
    # Under a key, the id is derived from the request: a retry after a 5xx (which frees the key)
    # or a lost response finds the schedule the first attempt stored.
    schedule_id = ctx.derived_id("schedule") or new_id()
    schedule = NewSchedule(
        # Without a name, a schedule is named by its id (unique, and free of '@').
        name=body.name or schedule_id,
        rule=rule,
        target=body.with_callbacks(body.target.to_target()),
        tenant=ctx.tenant,
        retry=body.retry.to_policy(),
        timeout=timedelta(seconds=body.timeout_seconds),
        missed=MissedPolicy(body.missed),
        metadata=body.metadata,
        start_at=body.start_at,
        end_at=body.end_at,
        flow=None if body.flow is None else body.flow.limits(),
        trace=trace,
        id=schedule_id,
    )
    schedule = traced_schedule(schedule, api)
    return ctx.run(
        201,
        lambda: ScheduleOut.of(
            api.scheduler.create_schedule(schedule, existing_ok=ctx.key is not None)
        ),
    )


@router.get(
    "/schedules",
    response_model=ScheduleListOut,
    openapi_extra={"parameters": [METADATA_FILTER.openapi()]},
)
def list_schedules(
    tenant: Tenant,
    api: Api,
    metadata: MetadataFilter,
    state: ScheduleState | None = None,
    name: ExactName = None,
    limit: Limit = 50,
    cursor: ScheduleCursor = None,
) -> Response:
    """The tenant's schedules by name, a page at a time; `state` picks active, paused or
    ended ones (ended: no occurrence left), `name` matches exactly, `metadata[key]=value`
    each pair."""
    page = api.scheduler.list_schedules(
        tenant=tenant,
        paused=None
        if state is None or state is ScheduleState.ENDED
        else state is ScheduleState.PAUSED,
        ended=None if state is None else state is ScheduleState.ENDED,
        metadata=metadata,
        name=name,
        limit=limit,
        cursor=cursor,
    )
    return json_response(
        200,
        ScheduleListOut(
            schedules=[ScheduleOut.of(s) for s in page.schedules], next_cursor=page.next_cursor
        ),
    )


@router.get("/schedules/{schedule_id}", response_model=ScheduleOut)
def get_schedule(tenant: Tenant, schedule_id: Id, api: Api) -> Response:
    return json_response(200, ScheduleOut.of(api.services.schedule(tenant, schedule_id)))


@router.patch("/schedules/{schedule_id}", response_model=ScheduleOut)
def update_schedule(tenant: Tenant, schedule_id: Id, body: SchedulePatchIn, api: Api) -> Response:
    """Change a schedule: only the fields given change (`metadata` merges; `start_at` or
    `end_at` null removes that bound). The next occurrence is computed again (from now, when
    the rule, the window or `paused` changes), and the jobs it materialised ahead that have
    not started are replaced by jobs of the new definition."""
    current = api.services.schedule(tenant, schedule_id)  # 404 for a deleted schedule
    change = body.change(current)
    if not isinstance(change.rule, Unset):
        api.services.check_rule(change.rule)
    return json_response(
        200, ScheduleOut.of(api.scheduler.update_schedule(schedule_id, change, tenant=tenant))
    )


@router.delete(
    "/schedules/{schedule_id}",
    status_code=204,
    responses={
        204: {"description": "Deleted now, or already deleted (a repeat is harmless)."},
        404: {"model": Problem, "description": "The tenant never had this schedule."},
    },
)
def delete_schedule(tenant: Tenant, schedule_id: Id, api: Api) -> Response:
    """Delete the schedule and cancel its live jobs. Idempotent, as DELETE of a job is: a
    schedule already deleted answers 204 again; 404 only for one this tenant never had."""
    found = api.scheduler.get_schedule(schedule_id, tenant=tenant)  # deleted ones are kept
    if not found.deleted:
        with contextlib.suppress(NotFound):  # a concurrent DELETE got there first
            api.scheduler.delete_schedule(schedule_id, tenant=tenant)
    return Response(status_code=204)


@router.post("/schedules/{schedule_id}/pause", response_model=ScheduleOut)
def pause_schedule(schedule_id: Id, ctx: Post, api: Api) -> Response:
    return _set_paused(api, ctx, schedule_id, paused=True)


@router.post("/schedules/{schedule_id}/resume", response_model=ScheduleOut)
def resume_schedule(schedule_id: Id, ctx: Post, api: Api) -> Response:
    return _set_paused(api, ctx, schedule_id, paused=False)


def _set_paused(api: ApiState, ctx: PostContext, schedule_id: str, *, paused: bool) -> Response:
    def operation() -> ScheduleOut:
        api.services.schedule(ctx.tenant, schedule_id)  # 404 for a deleted schedule
        change = api.scheduler.pause if paused else api.scheduler.resume
        return ScheduleOut.of(change(schedule_id, tenant=ctx.tenant))

    return ctx.run(200, operation)


@router.get("/schedules/{schedule_id}/upcoming", response_model=UpcomingOut)
def upcoming(
    tenant: Tenant, schedule_id: Id, api: Api, count: Annotated[int, Query(ge=1, le=100)] = 5
) -> Response:
    """The next `count` occurrences after now; fewer when the series ends first (an
    anchor's renewals end with the last one before the end of year 9999)."""
    schedule = api.services.schedule(tenant, schedule_id)
    return json_response(200, UpcomingOut(upcoming=api.scheduler.upcoming(schedule, count)))


__all__ = ["router"]
