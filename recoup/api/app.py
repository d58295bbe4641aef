"""The ASGI app: `create_app(store, clock=..., settings=...)`.

Every /v1 route needs `Authorization: Bearer <token>` (401 otherwise) and sees only its
tenant's jobs and schedules (another tenant's id is a 404, indistinguishable from an absent
one). Every POST runs under its `Idempotency-Key` when one is sent (`recoup.api.idempotent`).
Every error is problem+json (`recoup.api.problems`).

Route handlers are plain `def`s: the stores are synchronous, so FastAPI runs each request in
its thread pool and a slow query never blocks the event loop.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, Path, Query, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

from recoup.api import problems
from recoup.api.dunning_routes import clock_router, dunning_router
from recoup.api.idempotent import PostContext, json_response, post_context
from recoup.api.metrics import ApiMetrics, MetricsMiddleware
from recoup.api.problems import ApiProblem, Problem
from recoup.api.schemas import (
    CancelIn,
    CancelledOut,
    ExactlyOne,
    Health,
    JobIn,
    JobOut,
    JobPageOut,
    RunOut,
    RunsOut,
    ScheduleIn,
    ScheduleListOut,
    ScheduleOut,
    UpcomingOut,
)
from recoup.api.services import ApiTables, Services
from recoup.errors import NotFound, RecoupError
from recoup.idempotency import DEFAULT_LOCK_TIMEOUT, DEFAULT_RETENTION
from recoup.jobs.model import JobState, new_id
from recoup.jobs.schedule_model import MissedPolicy, NewSchedule
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.test_clock import TestClock
from recoup.recovery.service import Dunning
from recoup.storage import Store, open_api_tables
from recoup.timekeeping.clock import Clock

log = logging.getLogger("recoup.api")

DEFAULT_MAX_BODY_BYTES = 256 * 1024  # a job's target body is a webhook payload, not a file
PRUNE_EVERY = timedelta(minutes=10)
PRUNE_BATCH = 5_000  # keys deleted per statement
MAX_ID_LENGTH = 100
NO_NUL = r"^[^\x00]*$"  # path and query strings: PostgreSQL text cannot hold NUL


@dataclass(frozen=True, kw_only=True)
class ApiSettings:
    """What an operator can tune. `ssrf` decides which targets jobs may call."""

    ssrf: SsrfGuard = field(default_factory=SsrfGuard)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    idempotency_retention: timedelta = DEFAULT_RETENTION
    idempotency_lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT
    prune_every: timedelta | None = PRUNE_EVERY  # None: the app never prunes keys itself


def _error_responses() -> dict[int | str, dict[str, Any]]:
    reasons = {
        400: "Malformed Idempotency-Key.",
        401: "Missing, unknown or revoked bearer token.",
        404: "No such resource for this tenant.",
        409: "A live job or schedule holds that name, or the Idempotency-Key is in flight.",
        413: "The body is over the size limit.",
        422: "Invalid input (each field named), a refused target, or a reused key.",
        500: "An unexpected error; logged, nothing of it disclosed.",
        503: "The database is unavailable.",
    }
    return {code: {"model": Problem, "description": text} for code, text in reasons.items()}


ERRORS = _error_responses()


def create_app(
    store: Store,
    *,
    clock: Clock,
    settings: ApiSettings | None = None,
    tables: ApiTables | None = None,
    metrics: ApiMetrics | None = None,
    scheduler: Scheduler | None = None,
    dunning: Dunning | None = None,
    test_clock: TestClock | None = None,
) -> FastAPI:
    """The HTTP API over `store` (a backend from `recoup.storage.open_store`).

    `tables` (idempotency keys, tokens) defaults to the backend's own `api_tables`; `metrics`
    to a fresh per-app registry; `scheduler` to one over `store`, `clock` and `settings.ssrf`
    (pass the scheduler whose worker runs in this process, so new jobs wake it at once);
    `dunning` to the dunning runtime over that scheduler. `test_clock` (a server on a virtual
    clock) adds /v1/clock.
    """
    settings = settings or ApiSettings()
    scheduler = scheduler or Scheduler(store, clock=clock, ssrf=settings.ssrf)
    services = Services(scheduler, tables or open_api_tables(store))
    metrics = metrics or ApiMetrics(
        count_by_state=store.count_by_state,
        due_backlog=services.due_backlog,
        count_live=store.count_live,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = None
        if settings.prune_every is not None:
            task = asyncio.create_task(_prune_forever(services, settings, clock))
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app = FastAPI(
        title="Recoup",
        version=_version(),
        description="Durable jobs and failed-payment retries that take effect once.",
        lifespan=lifespan,
    )
    app.state.metrics = metrics
    app.state.services = services
    problems.install(app)
    # Outermost last: metrics see the final status, including the catch-all's 500.
    app.add_middleware(problems.BodyLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(problems.CatchAllMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=metrics)

    bearer = HTTPBearer(auto_error=False, description="A tenant's API token (`rcp_…`).")

    def tenant_of(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    ) -> str:
        tenant = services.authenticate(credentials.credentials) if credentials else None
        if tenant is None:
            raise ApiProblem(
                401,
                "unauthorized",
                "expected `Authorization: Bearer <token>` with an active token",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return tenant

    Tenant = Annotated[str, Depends(tenant_of)]

    async def posting(
        request: Request,
        tenant: Tenant,
        idempotency_key: Annotated[
            str | None,
            Header(
                alias="Idempotency-Key",
                description=(
                    "A unique key per request: bare (`abc-123`) or an RFC 8941 string"
                    ' (`"abc-123"`).'
                ),
            ),
        ] = None,
    ) -> PostContext:
        return await post_context(
            request,
            tenant,
            idempotency_key,
            services.tables,
            clock,
            settings.idempotency_lock_timeout,
        )

    Post = Annotated[PostContext, Depends(posting)]
    Id = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH, pattern=NO_NUL)]

    v1 = APIRouter(prefix="/v1", responses=ERRORS)

    # Jobs

    @v1.post("/jobs", status_code=201, response_model=JobOut, tags=["jobs"])
    def create_job(body: JobIn, ctx: Post) -> Response:
        """Schedule a one-off job at `run_at` or after `delay_seconds`."""
        run_at = body.instant(clock.now())
        return ctx.run(
            201,
            lambda: JobOut.of(
                scheduler.enqueue(
                    body.target.to_target(),
                    run_at=run_at,
                    name=body.name,
                    group=body.group,
                    retry=body.retry.to_policy(),
                    timeout=timedelta(seconds=body.timeout_seconds),
                    # The job carries the key (with the request's fingerprint) too: a retry
                    # after a lost response or a 5xx finds it.
                    idempotency_key=ctx.operation_key,
                    tenant=ctx.tenant,
                )
            ),
        )

    @v1.get("/jobs", response_model=JobPageOut, tags=["jobs"])
    def list_jobs(
        tenant: Tenant,
        state: JobState | None = None,
        name_prefix: Annotated[
            str | None, Query(min_length=1, max_length=200, pattern=NO_NUL)
        ] = None,
        group: Annotated[str | None, Query(min_length=1, max_length=200, pattern=NO_NUL)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Query(min_length=1, max_length=500, pattern=NO_NUL)] = None,
    ) -> Response:
        """Jobs of the tenant, newest first, a page at a time; `group` matches exactly."""
        page = scheduler.list(
            tenant=tenant,
            state=state,
            name_prefix=name_prefix,
            group=group,
            limit=limit,
            cursor=cursor,
        )
        return json_response(
            200,
            JobPageOut(jobs=[JobOut.of(j) for j in page.jobs], next_cursor=page.next_cursor),
        )

    @v1.post("/jobs/cancel", response_model=CancelledOut, tags=["jobs"])
    def cancel_jobs(body: CancelIn, ctx: Post) -> Response:
        """Cancel the live job named `name`, every live job whose name starts with
        `name_prefix`, or every live job of exactly `group`."""
        given = [body.name, body.name_prefix, body.group]
        if sum(value is not None for value in given) != 1:
            raise ExactlyOne("name", "name_prefix", "group")
        if body.group is not None:
            group = body.group
            return ctx.run(
                200,
                lambda: CancelledOut(cancelled=scheduler.cancel_group(group, tenant=ctx.tenant)),
            )
        if body.name is not None:
            name = body.name
            return ctx.run(
                200,
                lambda: CancelledOut(cancelled=scheduler.cancel_by_name(name, tenant=ctx.tenant)),
            )
        prefix = body.name_prefix
        assert prefix is not None
        return ctx.run(
            200,
            lambda: CancelledOut(cancelled=scheduler.cancel_by_prefix(prefix, tenant=ctx.tenant)),
        )

    @v1.get("/jobs/{job_id}", response_model=JobOut, tags=["jobs"])
    def get_job(tenant: Tenant, job_id: Id) -> Response:
        return json_response(200, JobOut.of(scheduler.get(job_id, tenant=tenant)))

    @v1.delete("/jobs/{job_id}", response_model=JobOut, tags=["jobs"])
    def cancel_job(tenant: Tenant, job_id: Id) -> Response:
        """Cancel a job. Idempotent: a job that already ended is returned as it is."""
        return json_response(200, JobOut.of(scheduler.cancel(job_id, tenant=tenant)))

    @v1.get("/jobs/{job_id}/runs", response_model=RunsOut, tags=["jobs"])
    def job_runs(tenant: Tenant, job_id: Id) -> Response:
        """Every attempt of the job, first first."""
        scheduler.get(job_id, tenant=tenant)  # 404 for an unknown job, not an empty log
        runs = scheduler.runs(job_id, tenant=tenant)
        return json_response(200, RunsOut(runs=[RunOut.of(r) for r in runs]))

    # Schedules

    @v1.post("/schedules", status_code=201, response_model=ScheduleOut, tags=["schedules"])
    def create_schedule(body: ScheduleIn, ctx: Post) -> Response:
        """A recurring schedule: `cron` in `timezone`, or a billing `anchor`."""
        rule = body.rule()
        services.check_rule(rule)
        # Under a key, the id is derived from the request: a retry after a 5xx (which frees
        # the key) or a lost response finds the schedule the first attempt stored.
        schedule_id = ctx.derived_id("schedule") or new_id()
        schedule = NewSchedule(
            # Without a name, a schedule is named by its id (unique, and free of '@').
            name=body.name or schedule_id,
            rule=rule,
            target=body.target.to_target(),
            tenant=ctx.tenant,
            retry=body.retry.to_policy(),
            timeout=timedelta(seconds=body.timeout_seconds),
            missed=MissedPolicy(body.missed),
            id=schedule_id,
        )
        return ctx.run(
            201,
            lambda: ScheduleOut.of(
                scheduler.create_schedule(schedule, existing_ok=ctx.key is not None)
            ),
        )

    @v1.get("/schedules", response_model=ScheduleListOut, tags=["schedules"])
    def list_schedules(tenant: Tenant) -> Response:
        schedules = services.list_schedules(tenant)
        return json_response(200, ScheduleListOut(schedules=[ScheduleOut.of(s) for s in schedules]))

    @v1.get("/schedules/{schedule_id}", response_model=ScheduleOut, tags=["schedules"])
    def get_schedule(tenant: Tenant, schedule_id: Id) -> Response:
        return json_response(200, ScheduleOut.of(services.schedule(tenant, schedule_id)))

    @v1.delete(
        "/schedules/{schedule_id}",
        status_code=204,
        tags=["schedules"],
        responses={
            204: {"description": "Deleted now, or already deleted (a repeat is harmless)."},
            404: {"model": Problem, "description": "The tenant never had this schedule."},
        },
    )
    def delete_schedule(tenant: Tenant, schedule_id: Id) -> Response:
        """Delete the schedule and cancel its live jobs. Idempotent, as DELETE of a job is: a
        schedule already deleted answers 204 again; 404 only for one this tenant never had."""
        found = scheduler.get_schedule(schedule_id, tenant=tenant)  # the store keeps deleted ones
        if not found.deleted:
            with contextlib.suppress(NotFound):  # a concurrent DELETE got there first
                scheduler.delete_schedule(schedule_id, tenant=tenant)
        return Response(status_code=204)

    def _pause_route(paused: bool) -> Callable[[Id, PostContext], Response]:
        def handler(schedule_id: Id, ctx: Post) -> Response:
            def operation() -> ScheduleOut:
                services.schedule(ctx.tenant, schedule_id)
                change = scheduler.pause if paused else scheduler.resume
                return ScheduleOut.of(change(schedule_id, tenant=ctx.tenant))

            return ctx.run(200, operation)

        return handler

    v1.add_api_route(
        "/schedules/{schedule_id}/pause",
        _pause_route(True),
        methods=["POST"],
        response_model=ScheduleOut,
        tags=["schedules"],
        summary="Pause Schedule",
        name="pause_schedule",
    )
    v1.add_api_route(
        "/schedules/{schedule_id}/resume",
        _pause_route(False),
        methods=["POST"],
        response_model=ScheduleOut,
        tags=["schedules"],
        summary="Resume Schedule",
        name="resume_schedule",
    )

    @v1.get("/schedules/{schedule_id}/upcoming", response_model=UpcomingOut, tags=["schedules"])
    def upcoming(
        tenant: Tenant, schedule_id: Id, count: Annotated[int, Query(ge=1, le=100)] = 5
    ) -> Response:
        """The next `count` occurrences after now; fewer when the series ends first (an
        anchor's renewals end with the last one before the end of year 9999)."""
        schedule = services.schedule(tenant, schedule_id)
        return json_response(200, UpcomingOut(upcoming=scheduler.upcoming(schedule, count)))

    app.include_router(v1)
    app.include_router(
        dunning_router(
            dunning or Dunning(scheduler, store),
            tenant_of=tenant_of,
            posting=posting,
            errors=ERRORS,
        )
    )
    if test_clock is not None:
        app.include_router(clock_router(test_clock, tenant_of=tenant_of, errors=ERRORS))

    # Operations

    @app.get("/healthz", response_model=Health, tags=["operations"])
    def healthz() -> Health:
        """The process answers."""
        return Health(status="ok")

    @app.get(
        "/readyz",
        response_model=Health,
        tags=["operations"],
        responses={503: {"model": Problem, "description": "The database is unreachable."}},
    )
    def readyz() -> Health:
        """The database answers."""
        services.ping()
        return Health(status="ok")

    @app.get(
        "/metrics",
        tags=["operations"],
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text."}},
    )
    def metrics_endpoint() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    _problem_media_types(app)
    return app


def _problem_media_types(app: FastAPI) -> None:
    """Document error bodies as `application/problem+json`, which is what they are."""
    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = original()
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                for code, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if code[0] in "45" and "application/json" in content:
                        content[problems.PROBLEM_MEDIA_TYPE] = content.pop("application/json")
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


async def _prune_forever(services: Services, settings: ApiSettings, clock: Clock) -> None:
    assert settings.prune_every is not None
    while True:
        try:
            cutoff = clock.now() - settings.idempotency_retention
            while True:  # in batches, so no single delete holds the write lock for long
                pruned = await run_in_threadpool(
                    services.tables.prune_keys, older_than=cutoff, limit=PRUNE_BATCH
                )
                if pruned:
                    log.info("pruned %d idempotency keys older than %s", pruned, cutoff)
                if pruned < PRUNE_BATCH:
                    break
        except RecoupError:
            log.warning("could not prune idempotency keys", exc_info=True)
        await asyncio.sleep(settings.prune_every.total_seconds())


def _version() -> str:
    from recoup import __version__

    return __version__
