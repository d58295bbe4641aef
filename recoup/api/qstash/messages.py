"""QStash's message routes on Recoup's jobs: publish (a message is an HTTP job to the destination,
delivered the QStash way: `HttpTarget.delivery == "qstash"`), read, cancel one, many or all,
and the tenant's signing keys. Mounted under `/qstash/v2` (`recoup.api.qstash`)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from starlette.responses import Response

from recoup.api.deps import Api, Tenant, refuse_over_limit
from recoup.api.fast_route import with_fast_path
from recoup.api.qstash import headers as upstash
from recoup.api.qstash.flow_control import flow_control, job_fields
from recoup.api.qstash.shapes import (
    GROUP,
    answer,
    body_text,
    destination_url,
    is_qstash,
    message_json,
    qstash_target,
)
from recoup.api.state import ApiState
from recoup.api.token_cache import StaleToken
from recoup.api.trace_headers import traced
from recoup.errors import InvalidInput, NotFound, RecoupError
from recoup.jobs.model import Job, NewJob
from recoup.jobs.qstash_signing import qstash_keys
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.trace_context import trace_context

router = APIRouter()


def as_bad_request(exc: InvalidInput) -> Exception:
    """Recoup's own checks of the target (URL, forwarded header names and values, the SSRF
    guard) answered as QStash answers bad input: 400, naming the field (a callback's by its
    header)."""
    field = upstash.CALLBACK_HEADERS.get(exc.field, exc.field)
    return upstash.refuse(field, exc.value, exc.allowed)


async def publish(destination: str, request: Request, tenant: Tenant, api: Api) -> Response:
    """Publish a message: `{messageId}`, with `deduplicated: true` when a job of the tenant
    already holds its deduplication key (that job's id is the answer)."""
    job = await _message(destination, request, tenant, api)
    return _published(job, api.scheduler.insert_checked(job))


async def fast_publish(request: Request) -> Response | None:
    """`publish` without dependency solving and without a read of the token (its owner from
    `recoup.api.token_cache`), the insert and the epoch's check in one transaction; None for
    what `publish` answers itself: no cached token, a refusal (answered after the token is read
    afresh, as `publish` orders them), a token whose epoch moved."""
    api: ApiState = request.app.state.api
    authorization = request.headers.getlist("authorization")
    owner = api.tokens.cached(authorization[0]) if len(authorization) == 1 else None
    if owner is None:
        return None
    refuse_over_limit(api, owner.tenant, request)  # counted once, whoever answers
    try:
        job = await _message(request.path_params["destination"], request, owner.tenant, api)
    except RecoupError:
        return None
    scheduler = api.scheduler

    def unit() -> Job:
        api.tokens.check(owner)  # `StaleToken` undoes the unit: nothing inserted
        return scheduler.insert_checked(job)

    try:
        stored = await api.threads.run(api.services.tables.atomically, unit)
    except StaleToken:
        return None
    return _published(job, stored)


async def _message(destination: str, request: Request, tenant: str, api: ApiState) -> NewJob:
    """The job of a publish, checked: QStash's 400 for a header or target refused. On the event
    loop, but for a destination whose host the SSRF guard looks up in DNS (a thread's work)."""
    given = request.headers
    upstash.check_known(given, upstash.PUBLISH_HEADERS)
    url = destination_url(destination, request.url.query)
    body = body_text(await request.body())
    method = upstash.method(given)
    sent = upstash.forwarded(given)
    key = upstash.dedup(given, destination=url, method=method, body=body or "", sent=sent).key
    flow = flow_control(given)
    scheduler = api.scheduler
    try:
        job = NewJob(
            run_at=upstash.run_at(given, now=api.clock.now()),
            target=qstash_target(url, method, sent, body, upstash.callbacks(given)),
            tenant=tenant,
            idempotency_key=key,
            retry=upstash.retry_policy(given),
            timeout=upstash.timeout(given),
            group=GROUP,
            **job_fields(flow),
            trace=trace_context(given.get("traceparent"), given.get("tracestate")),
        )
        job = replace(job, name=f"qstash-{job.id}")  # the message id: a log line names it
        if scheduler.looks_up(job.target):
            await run_in_threadpool(scheduler.check, job)
        else:
            scheduler.check(job)
        return traced(job, api)
    except InvalidInput as exc:
        raise as_bad_request(exc) from None


def _published(job: NewJob, stored: Job) -> Response:
    published: dict[str, Any] = {"messageId": stored.id}
    if stored.id != job.id:
        published["deduplicated"] = True
    return answer(201, published)


# As `@router.post` would declare it, with a fast path in front (`fast_publish`).
router.add_api_route(
    "/publish/{destination:path}",
    publish,
    methods=["POST"],
    route_class_override=with_fast_path(fast_publish),
)


def message_of(scheduler: Scheduler, tenant: str, message_id: str) -> Job:
    """The tenant's job published through this API; 404 for any other id (a job made through
    /v1 is not a QStash message, and cannot be cancelled from here)."""
    job = scheduler.get(message_id, tenant=tenant)
    if not is_qstash(job.target):
        raise NotFound(f"no message {message_id!r}")
    return job


@router.get("/messages/{message_id}")
def get_message(message_id: str, tenant: Tenant, api: Api) -> Response:
    return answer(200, message_json(message_of(api.scheduler, tenant, message_id)))


@router.delete("/messages/{message_id}")
def cancel_message(message_id: str, tenant: Tenant, api: Api) -> Response:
    """Cancel one message (a message already delivered or failed stays as it ended)."""
    scheduler = api.scheduler
    message_of(scheduler, tenant, message_id)
    return answer(200, message_json(scheduler.cancel(message_id, tenant=tenant)))


_CANCEL_PARAMETERS: Final = ("messageIds", "count", "cursor")


def ids_given(
    request: Request, raw: bytes, name: str, allowed: tuple[str, ...]
) -> list[str] | None:
    """The ids a bulk DELETE names: the query's repeated `name` (as the TypeScript SDK sends
    them), else the JSON body's `{name: [...]}` (as the Python SDK does); None when neither
    names any. A query parameter outside `allowed` (QStash's filters) is refused by name."""
    params = request.query_params
    for given, value in params.multi_items():
        if given not in allowed:
            raise upstash.refuse(
                given,
                value,
                "filters are not supported; supported: " + ", ".join(allowed),
                slug="unsupported-parameter",
            )
    listed = params.getlist(name)
    if listed:
        return listed
    if not raw.strip():
        return None
    try:
        ids = json.loads(raw)[name]
    except (ValueError, KeyError, TypeError):
        ids = None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise upstash.refuse(name, raw[:80], f'expected {{"{name}": ["<id>", ...]}}')
    return ids


@router.delete("/messages")
async def cancel_messages(request: Request, tenant: Tenant, api: Api) -> Response:
    """`messageIds` (the query's, repeated, or the body's `{"messageIds": [...]}`) cancels
    those of them still waiting; neither (the SDKs' cancel-all, which may send `count` and
    `cursor`) cancels every waiting message published through this API. Answers
    `{"cancelled": n}`."""
    ids = ids_given(request, await request.body(), "messageIds", _CANCEL_PARAMETERS)
    scheduler = api.scheduler
    if ids is None:
        count = await run_in_threadpool(scheduler.cancel_group, GROUP, tenant=tenant)
        return answer(200, {"cancelled": count})

    def cancel_each() -> int:
        cancelled = 0
        for message_id in ids:
            try:
                job = message_of(scheduler, tenant, message_id)
            except NotFound:
                continue
            if job.state.is_live and scheduler.cancel(message_id, tenant=tenant).state.is_final:
                cancelled += 1
        return cancelled

    return answer(200, {"cancelled": await run_in_threadpool(cancel_each)})


@router.get("/keys")
def signing_keys(tenant: Tenant, api: Api) -> Response:
    """The tenant's QStash signing keys, derived from its signing secrets
    (`recoup.jobs.qstash_signing`), for the SDK's `Receiver`."""
    found = api.scheduler.store.get_tenant(tenant)
    if found is None:
        raise NotFound(f"no tenant {tenant!r}")
    keys = qstash_keys(found.signing_secrets(api.clock.now()))
    return answer(200, {"current": keys.current, "next": keys.next})


@router.post("/keys/rotate")
def rotate_keys(tenant: Tenant) -> Response:
    raise upstash.refuse(
        "POST /v2/keys/rotate",
        tenant,
        "the keys follow the tenant's signing secret; its operator rotates it with "
        "`recoup tenants rotate-secret`, after which GET /v2/keys gives current and next",
        slug="unsupported-operation",
    )


__all__ = ["router"]
