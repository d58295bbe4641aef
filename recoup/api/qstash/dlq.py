"""QStash's dead-letter queue on Recoup's failed jobs: a message (published, or a schedule's
occurrence, delivered the QStash way) whose retries are spent is in the DLQ under its own id
(`dlqId` = `messageId`). Listed a page at a time (`cursor`, `count` up to 100; QStash's other
filters are refused by name), read and deleted one or many at a time, as the `qstash` SDK's
`client.dlq` calls them. A DLQ entry is the message's JSON plus its last attempt's answer
(`responseStatus`, 0 when none came; `responseBody`, the start Recoup keeps;
`responseHeader`, empty: Recoup keeps no response headers). To send one again, retry the job
(`POST /v1/jobs/{id}/retry`)."""

from __future__ import annotations

from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from recoup.api.deps import Api, Tenant
from recoup.api.qstash import headers as upstash
from recoup.api.qstash.messages import ids_given
from recoup.api.qstash.shapes import answer, is_qstash, message_json
from recoup.errors import InvalidInput, NotFound
from recoup.jobs.model import Job, JobState
from recoup.jobs.scheduler import Scheduler

router = APIRouter()

MAX_COUNT: Final = 100  # QStash's default and largest page of the DLQ
_LIST_PARAMETERS: Final = ("cursor", "count")


def dlq_json(scheduler: Scheduler, job: Job) -> dict[str, Any]:
    runs = scheduler.runs(job.id, tenant=job.tenant)
    last = runs[-1] if runs else None
    found = message_json(job)
    found["dlqId"] = job.id
    found["responseStatus"] = 0 if last is None or last.status_code is None else last.status_code
    found["responseHeader"] = {}
    if last is not None and last.response_excerpt is not None:
        found["responseBody"] = last.response_excerpt
    return found


def dead_letter(scheduler: Scheduler, tenant: str, dlq_id: str) -> Job:
    """The tenant's failed QStash message `dlq_id`; 404 for any other id."""
    try:
        job = scheduler.get(dlq_id, tenant=tenant)
    except NotFound:
        job = None
    if job is None or not is_qstash(job.target) or job.state is not JobState.FAILED:
        raise NotFound(f"no message {dlq_id!r} in the DLQ")
    return job


def _count(value: str | None) -> int:
    if value is None:
        return MAX_COUNT
    if not value.isdigit() or not 1 <= int(value) <= MAX_COUNT:
        raise upstash.refuse("count", value, f"expected an integer 1–{MAX_COUNT}")
    return int(value)


@router.get("/dlq")
def list_dlq(request: Request, tenant: Tenant, api: Api) -> Response:
    """A page of the DLQ, newest first: `{messages, cursor}` (no cursor at the end). A page
    may hold fewer than `count` messages while a cursor follows (jobs of /v1 that failed
    share the listing and are left out)."""
    params = request.query_params
    for name, value in params.items():
        if name not in _LIST_PARAMETERS:
            raise upstash.refuse(
                name,
                value,
                "DLQ filters are not supported; supported: cursor, count",
                slug="unsupported-parameter",
            )
    scheduler = api.scheduler
    try:
        page = scheduler.list_jobs(
            tenant=tenant,
            state=JobState.FAILED,
            limit=_count(params.get("count")),
            cursor=params.get("cursor"),
        )
    except InvalidInput as exc:
        raise upstash.refuse(exc.field, exc.value, exc.allowed) from None
    messages = [dlq_json(scheduler, job) for job in page.jobs if is_qstash(job.target)]
    found: dict[str, Any] = {"messages": messages}
    if page.next_cursor is not None:
        found["cursor"] = page.next_cursor
    return answer(200, found)


@router.get("/dlq/{dlq_id}")
def get_dead_letter(dlq_id: str, tenant: Tenant, api: Api) -> Response:
    scheduler = api.scheduler
    return answer(200, dlq_json(scheduler, dead_letter(scheduler, tenant, dlq_id)))


@router.delete("/dlq/{dlq_id}")
def delete_dead_letter(dlq_id: str, tenant: Tenant, api: Api) -> Response:
    """Remove a message from the DLQ: the failed job is deleted (its run log stays until it
    is pruned)."""
    scheduler = api.scheduler
    dead_letter(scheduler, tenant, dlq_id)
    if not scheduler.delete_failed(dlq_id, tenant=tenant):
        raise NotFound(f"no message {dlq_id!r} in the DLQ")  # deleted meanwhile
    return Response(status_code=200)


@router.delete("/dlq")
async def delete_dead_letters(request: Request, tenant: Tenant, api: Api) -> Response:
    """`dlqIds` (the query's, repeated, or the body's `{"dlqIds": [...]}`): delete those of
    them in the DLQ; `{"deleted": n}`."""
    ids = ids_given(request, await request.body(), "dlqIds", ("dlqIds", "cursor"))
    if ids is None:
        raise upstash.refuse(
            "dlqIds", "", 'expected ?dlqIds=<id>&… or {"dlqIds": ["<id>", ...]} (no delete-all)'
        )
    scheduler = api.scheduler

    def delete_each() -> int:
        deleted = 0
        for dlq_id in ids:
            try:
                dead_letter(scheduler, tenant, dlq_id)
            except NotFound:
                continue
            deleted += scheduler.delete_failed(dlq_id, tenant=tenant)
        return deleted

    return answer(200, {"deleted": await run_in_threadpool(delete_each)})


__all__ = ["router"]
