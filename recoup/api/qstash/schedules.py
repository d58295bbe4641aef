"""QStash's schedule routes on Recoup's schedules: create with `Upstash-Cron` (a cron rule in UTC,
or in the zone a `CRON_TZ=<zone>` prefix names, as QStash reads it), read, list, delete, pause
and resume. Each occurrence is a Recoup job delivered the QStash way, so
`GET /v2/messages/{id}` reads it too."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from recoup.api.deps import Api, Tenant
from recoup.api.qstash import headers as upstash
from recoup.api.qstash.flow_control import flow_control, schedule_limits
from recoup.api.qstash.messages import as_bad_request
from recoup.api.qstash.shapes import (
    answer,
    body_text,
    destination_url,
    is_qstash,
    qstash_target,
    schedule_json,
)
from recoup.api.services import Services
from recoup.api.trace_headers import traced_schedule
from recoup.errors import InvalidInput, NotFound
from recoup.jobs.model import new_id
from recoup.jobs.schedules.model import CronRule, NewSchedule, Schedule
from recoup.jobs.trace_context import trace_context

router = APIRouter()

_CRON_TZ = re.compile(r"CRON_TZ=(\S+)\s+(.+)")
_SCHEDULE_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def cron_rule(value: str | None) -> CronRule:
    if value is None or not value.strip():
        raise upstash.refuse(
            "Upstash-Cron", value, "expected a cron expression such as '*/5 * * * *'"
        )
    prefixed = _CRON_TZ.fullmatch(value.strip())
    if prefixed is not None:
        return CronRule(expression=prefixed.group(2), timezone=prefixed.group(1))
    return CronRule(expression=value.strip(), timezone="UTC")


def schedule_id(value: str | None, services: Services, tenant: str) -> str:
    """A new schedule's id: `Upstash-Schedule-Id` when given (QStash's update of an existing
    schedule is refused: delete it and create it again), else a fresh one."""
    if value is None:
        return new_id()
    if not _SCHEDULE_ID.fullmatch(value):
        raise upstash.refuse(
            "Upstash-Schedule-Id", value, "expected 1–100 letters, digits, '_', '.' or '-'"
        )
    found = services.scheduler.store.get_schedule(tenant, value)
    if found is not None and found.deleted:
        raise upstash.refuse(
            "Upstash-Schedule-Id",
            value,
            "that id belonged to a deleted schedule (its jobs still name it); choose another",
        )
    if found is not None:
        raise upstash.refuse(
            "Upstash-Schedule-Id",
            value,
            "updating an existing schedule is not supported; delete it and create a new one",
            slug="unsupported-operation",
        )
    return value


@router.post("/schedules/{destination:path}")
async def create_schedule(destination: str, request: Request, tenant: Tenant, api: Api) -> Response:
    given = request.headers
    upstash.check_known(given, upstash.SCHEDULE_HEADERS)
    url = destination_url(destination, request.url.query)
    body = body_text(await request.body())
    rule = cron_rule(given.get("upstash-cron"))
    services = api.services
    try:
        services.check_rule(rule)
        sid = await run_in_threadpool(
            schedule_id, given.get("upstash-schedule-id"), services, tenant
        )
        schedule = NewSchedule(
            id=sid,
            name=f"qstash-{sid}",
            rule=rule,
            target=qstash_target(
                url,
                upstash.method(given),
                upstash.forwarded(given),
                body,
                upstash.callbacks(given),
            ),
            tenant=tenant,
            retry=upstash.retry_policy(given),
            timeout=upstash.timeout(given),
            flow=schedule_limits(flow_control(given)),
            trace=trace_context(given.get("traceparent"), given.get("tracestate")),
        )
        schedule = traced_schedule(schedule, api)
        stored = await run_in_threadpool(api.scheduler.create_schedule, schedule)
    except InvalidInput as exc:
        field = "Upstash-Cron" if exc.field in ("cron", "timezone") else exc.field
        raise as_bad_request(InvalidInput(field, exc.value, exc.allowed)) from None
    return answer(201, {"scheduleId": stored.id})


def schedule_of(services: Services, tenant: str, found_id: str) -> Schedule:
    """The tenant's live schedule made through this API; 404 for any other id."""
    found = services.schedule(tenant, found_id)
    if not is_qstash(found.target) or not isinstance(found.rule, CronRule):
        raise NotFound(f"no schedule {found_id!r}")
    return found


@router.get("/schedules/{schedule_id}")
def get_schedule(schedule_id: str, tenant: Tenant, api: Api) -> Response:
    return answer(200, schedule_json(schedule_of(api.services, tenant, schedule_id)))


@router.get("/schedules")
def list_schedules(tenant: Tenant, api: Api) -> Response:
    """A bare JSON array, as QStash answers."""
    found = [
        schedule_json(s)
        for s in api.services.list_schedules(tenant)
        if is_qstash(s.target) and isinstance(s.rule, CronRule)
    ]
    return answer(200, found)


@router.delete("/schedules/{schedule_id}")
def delete_schedule(schedule_id: str, tenant: Tenant, api: Api) -> Response:
    """Delete the schedule and cancel its occurrences still waiting."""
    schedule_of(api.services, tenant, schedule_id)
    api.scheduler.delete_schedule(schedule_id, tenant=tenant)
    return Response(status_code=200)


@router.patch("/schedules/{schedule_id}/pause")
def pause_schedule(schedule_id: str, tenant: Tenant, api: Api) -> Response:
    schedule_of(api.services, tenant, schedule_id)
    return answer(200, schedule_json(api.scheduler.pause(schedule_id, tenant=tenant)))


@router.patch("/schedules/{schedule_id}/resume")
def resume_schedule(schedule_id: str, tenant: Tenant, api: Api) -> Response:
    schedule_of(api.services, tenant, schedule_id)
    return answer(200, schedule_json(api.scheduler.resume(schedule_id, tenant=tenant)))


__all__ = ["router"]
