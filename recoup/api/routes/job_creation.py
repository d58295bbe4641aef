"""Creating a job (`POST /v1/jobs`): the operation, and its fast path.

The operation (`create`) is one authenticated, idempotent transaction: the checks (the SSRF
guard's DNS look-up too) before it, then the key's claim, the insert and the stored response
in one unit of work (`PostContext.run_with_status(atomic=True)`; on SQLite, shared with the
requests committing at the same time).

The fast path (`fast_create`, through `recoup.api.fast_route`) answers the usual request without
FastAPI's dependency solving and with one hop to a thread (`recoup.api.store_threads`), where
the declared route costs two (its sync dependency and its sync endpoint): it takes the token's
owner from the process's cache (`recoup.api.token_cache`), whose epoch the unit checks; the body
is validated once, by the same model, and parsed once for the fingerprint too. The unit stays in
a thread rather than on the event loop: in process the loop saved a sixth (SQLite) to a quarter
(PostgreSQL) of the app's CPU per request, but through uvicorn the difference was within the
noise (`bench/api_cpu.py`, with `--in-process` and without), while a statement waiting on the
loop (a commit's fsync, a round trip, a lock another process holds) would stop every other
request, and SQLite's group commit could batch nothing. Its unit is the store's `create_job`
(`create_at_once`): on PostgreSQL one statement, one round trip, for the epoch, the key's claim,
the insert and the stored answer; on SQLite the same as plain statements of one group-commit
unit. What that unit declines goes through `create`. Whatever it is not sure of (no cached
token, a query string, a content type, a header or a body that does not pass, a stale owner) it
declines, and the route's full handler answers it as before.
"""

from __future__ import annotations

import functools
from datetime import timedelta

from starlette.requests import Request
from starlette.responses import Response

from recoup.api.fast_posts import fast_post
from recoup.api.idempotent import PostContext
from recoup.api.state import ApiState
from recoup.api.token_cache import CachedOwner, StaleToken
from recoup.api.trace_headers import traced
from recoup.errors import InvalidInput
from recoup.jobs.model import Job, NewJob
from recoup.jobs.scheduler import OnConflict, Scheduler
from recoup.jobs.trace_context import TraceContext
from recoup.storage.job_creations import CREATED, JSON, Declined, JobCreation, KeyClaim
from recoup.timekeeping.instants import to_utc
from recoup.wire.schemas import JobIn, JobOut
from recoup.wire.schemas.flow import flow_fields


def create(body: JobIn, ctx: PostContext, api: ApiState, trace: TraceContext | None) -> Response:
    """The job of `body` for `ctx.tenant`: 201 and the new job, 200 and the one that had the
    body's `idempotency_key`, or the problem of a refusal (stored under the request's key)."""
    try:
        job = _new_job(body, ctx, api, trace)
    except InvalidInput as exc:
        # Refused under the key as any refusal is: a response stored for it is replayed first.
        return ctx.run(201, functools.partial(_refuse, exc))
    # The key's claim, the insert and the stored response: one transaction.
    # A job found by the request's own key is what this request created before (a retry
    # after a lost answer): 201 as the first time. One found by the body's key is another's.
    found = 200 if body.idempotency_key is not None else 201
    insert = functools.partial(_insert, api.scheduler, job, found, on_conflict=body.on_conflict)
    return ctx.run_with_status(insert, atomic=True)


def create_at_once(
    body: JobIn, ctx: PostContext, owner: CachedOwner, api: ApiState, trace: TraceContext | None
) -> Response:
    """`create` for the usual request: the job, its key's claim and stored answer in one unit
    of the store (`ApiTables.create_job`: one statement on PostgreSQL), while the token's epoch
    is still `owner`'s (`StaleToken` if not). Whatever that unit declines (a key already used,
    a job that clashes) and every refusal are answered by `create`, as before."""
    try:
        job = _new_job(body, ctx, api, trace)
    except InvalidInput:
        return create(body, ctx, api, trace)
    claim = None
    if ctx.key is not None:
        claim = KeyClaim(key=ctx.key, fingerprint=ctx.fingerprint, method=ctx.method, path=ctx.path)
    creation = JobCreation(
        job=job,
        now=api.scheduler.clock.now(),
        epoch=owner.epoch,
        claim=claim,
        answer=_answer,
    )
    result = api.services.tables.create_job(creation)
    if isinstance(result, Declined):
        if result.stale:
            raise StaleToken("the tokens or tenants changed since this token was read")
        return create(body, ctx, api, trace)
    api.scheduler.jobs_added()
    return Response(result.body, status_code=CREATED, media_type=JSON)


def _answer(job: Job) -> bytes:
    """A created job's answer, the bytes `json_response` gives."""
    return JobOut.of(job).model_dump_json().encode()


def _new_job(body: JobIn, ctx: PostContext, api: ApiState, trace: TraceContext | None) -> NewJob:
    """The job `body` asks for, checked (the SSRF guard's DNS look-up too: before any
    transaction), or `InvalidInput`."""
    job = NewJob(
        run_at=to_utc("run_at", body.instant(api.clock.now())),
        target=body.with_callbacks(body.target.to_target()),
        tenant=ctx.tenant,
        name=body.name,
        # The job's own key, else the request's (with its fingerprint): either way a
        # retry after a lost response or a 5xx finds the job instead of making another.
        idempotency_key=body.idempotency_key or ctx.operation_key,
        retry=body.retry.to_policy(),
        timeout=timedelta(seconds=body.timeout_seconds),
        group=body.group,
        metadata=body.metadata,
        **flow_fields(body.flow, body.ordering_key, body.ordering_on_failure),
        trace=trace,
    )
    if body.on_conflict == "replace" and body.idempotency_key is None:
        raise InvalidInput("on_conflict", "replace", "expected an idempotency_key with it")
    api.scheduler.check(job)
    return traced(job, api)


def _insert(
    scheduler: Scheduler, job: NewJob, found: int, *, on_conflict: OnConflict = "return"
) -> tuple[int, JobOut]:
    """201 and the new job, or `found` and the job that already had this idempotency key
    (replaced by this one with `on_conflict="replace"`, while it had not started)."""
    stored = scheduler.insert_checked(job, on_conflict=on_conflict)
    return (201 if stored.id == job.id else found), JobOut.of(stored)


def _refuse(error: InvalidInput) -> JobOut:
    raise error


async def fast_create(request: Request) -> Response | None:
    """`POST /v1/jobs` answered without dependency solving, or None: see the module."""
    post = await fast_post(request, JobIn)
    if post is None:
        return None
    api: ApiState = request.app.state.api
    body = post.body
    try:
        return await api.threads.run(create_at_once, body, post.ctx, post.owner, api, post.trace)
    except StaleToken:
        return None  # undone: the full route reads the token afresh (401 if it is revoked)


__all__ = ["create", "create_at_once", "fast_create"]
