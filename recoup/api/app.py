"""The ASGI app: `create_app(store, clock=...)` assembles the state, middleware and routers.

Every /v1 route needs `Authorization: Bearer <token>` (401 otherwise) and sees only its
tenant's jobs and schedules (another tenant's id is a 404, indistinguishable from an absent
one). Every POST runs under its `Idempotency-Key` when one is sent (`recoup.api.idempotent`).
Every error is problem+json (`recoup.api.problems`). The routes are in `recoup.api.routes`,
one router per resource; what they read is the `ApiState` set here on `app.state.api`.
"""

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.concurrency import run_in_threadpool
from starlette.routing import BaseRoute

from recoup.api import dashboard, docs_page, error_handlers, problems
from recoup.api.fast_route import FastPathApp, FastPathRoute, fast_lane
from recoup.api.metrics import ApiMetrics, MetricsMiddleware
from recoup.api.qstash import router as qstash_router
from recoup.api.rate_limits import TenantRateLimiter
from recoup.api.routes import clock as clock_routes
from recoup.api.routes import customers as customer_routes
from recoup.api.routes import dunning as dunning_routes
from recoup.api.routes import emails as email_routes
from recoup.api.routes import intake as intake_routes
from recoup.api.routes import jobs as job_routes
from recoup.api.routes import operations as operation_routes
from recoup.api.routes import reports as report_routes
from recoup.api.routes import schedules as schedule_routes
from recoup.api.routes import tenant as tenant_routes
from recoup.api.services import ApiTables, Services
from recoup.api.shared_routes import include_once
from recoup.api.state import ApiSettings, ApiState
from recoup.api.token_cache import TokenCache
from recoup.errors import RecoupError
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.time_travel import TestClock
from recoup.jobs.tracing import Tracing
from recoup.recovery.email_settings import EmailSettings
from recoup.recovery.hosted_charging import StripeAccounts
from recoup.recovery.hosted_settings import HostedSettings
from recoup.recovery.service import Dunning
from recoup.recovery.stripe_intake import StripeIntake
from recoup.sealed import Box, secret_box_for
from recoup.storage import Store, open_api_tables
from recoup.timekeeping.clock import Clock

log = logging.getLogger("recoup.api")

PRUNE_BATCH = 5_000  # keys deleted per statement
STRIPE_API_BASE_ENV = "RECOUP_STRIPE_API_BASE"  # another Stripe-compatible server (tests)


def _default_box(store: Store) -> Box:
    # A SQLite store knows its file (`path`); the key file lives beside it.
    path = getattr(store, "path", None) if store.backend == "sqlite" else None
    return secret_box_for(None if path in (None, ":memory:") else path, os.environ)


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
    limiter: TenantRateLimiter | None = None,
    secret_box: Box | None = None,
    stripe_accounts: StripeAccounts | None = None,
    tracing: Tracing | None = None,
) -> FastAPI:
    """The HTTP API over `store` (a backend from `recoup.storage.open_store`).

    `tables` (idempotency keys, tokens) defaults to the backend's own `api_tables`; `metrics`
    to a fresh per-app registry; `scheduler` to one over `store`, `clock` and `settings.ssrf`
    (pass the scheduler whose worker runs in this process, so new jobs wake it at once);
    `dunning` to the dunning runtime over that scheduler. `test_clock` (a server on a virtual
    clock) adds /v1/clock. `limiter` defaults to buckets of `settings.rate_limit` on the
    monotonic clock (tests pass one on a clock they step). `secret_box` seals the provider
    secrets the API stores (default: `RECOUP_SECRET_KEY`, else the key file beside a SQLite
    file; `recoup.sealed`). `stripe_accounts` reads Stripe with a tenant's key (hosted
    charging) for the webhook intake (default: over `secret_box`, at Stripe's API or at
    `RECOUP_STRIPE_API_BASE`; pass the process's own to share its clients). `tracing` emits
    a span for each job created (`recoup.jobs.tracing`; None: none).
    """
    settings = settings or ApiSettings()
    scheduler = scheduler or Scheduler(store, clock=clock, ssrf=settings.ssrf)
    services = Services(scheduler, tables or open_api_tables(store))
    dunning = dunning or Dunning(scheduler, store)
    box = secret_box or _default_box(store)
    if stripe_accounts is None:
        stripe_accounts = StripeAccounts(box, api_base=os.environ.get(STRIPE_API_BASE_ENV) or None)
    state = ApiState(
        settings=settings,
        clock=clock,
        services=services,
        tokens=TokenCache(services.tables),
        dunning=dunning,
        intake=StripeIntake(
            dunning,
            store,
            box=box,
            lock_timeout=settings.idempotency_lock_timeout,
            stripe=stripe_accounts,
        ),
        hosted=HostedSettings(store.hosted, box, now=clock.now),
        emails=EmailSettings(store.messages, box, now=clock.now),
        metrics=metrics
        or ApiMetrics(
            count_by_state=store.count_by_state,
            due_backlog=services.due_backlog,
            count_live=store.count_live,
            count_by_tenant=store.count_by_tenant,
            dunning_figures=store.dunning_figures,
        ),
        test_clock=test_clock,
        limiter=limiter
        or (TenantRateLimiter(settings.rate_limit) if settings.rate_limit is not None else None),
        tracing=tracing,
    )

    app = FastPathApp(
        title="Recoup",
        version=_version(),
        description="Durable jobs and failed-payment retries that take effect once.",
        lifespan=_lifespan,
        docs_url=None,  # served by `docs_page` from local assets, not a CDN
        redoc_url=None,
    )
    app.state.api = state
    app.state.services = services  # as before the split: tests reach the scheduler here
    error_handlers.install(app)
    # Outermost last: metrics see the final status, including the catch-all's 500.
    app.add_middleware(problems.BodyLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(problems.CatchAllMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)

    app.router.routes.extend(_api_routes(with_clock=test_clock is not None))
    app.lane = _fast_lane(with_clock=test_clock is not None)
    dashboard.mount(app)  # the HTML pages at /, on the same services
    docs_page.install(app)
    _problem_media_types(app)
    return app


def _api_routers(*, with_clock: bool) -> tuple[APIRouter, ...]:
    """The /v1, QStash and operations routers, in the order their routes are tried."""
    return (
        job_routes.router,
        schedule_routes.router,
        dunning_routes.router,
        customer_routes.router,
        email_routes.router,
        report_routes.router,
        intake_routes.router,
        tenant_routes.router,  # whose the token is (`recoup --url`)
        qstash_router,  # the QStash-compatible API (`recoup.api.qstash`)
        *([clock_routes.router] if with_clock else []),
        operation_routes.router,
    )


@functools.cache
def _api_routes(*, with_clock: bool) -> tuple[BaseRoute, ...]:
    """The API's routes, shared by every app (`recoup.api.shared_routes`)."""
    return include_once(*_api_routers(with_clock=with_clock))


@functools.cache
def _fast_lane(*, with_clock: bool) -> Mapping[str, FastPathRoute]:
    """The API's fast-path POSTs at fixed paths (`recoup.api.fast_route.fast_lane`)."""
    return MappingProxyType(fast_lane(_api_routers(with_clock=with_clock)))


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


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: ApiState = app.state.api
    task = None
    stopping = asyncio.Event()
    if state.settings.prune_every is not None:
        task = asyncio.create_task(_prune_until(stopping, state))
    try:
        yield
    finally:
        if task is not None:
            # Told, not cancelled: a cancelled task may leave its batch running in a worker
            # thread after shutdown, against a store its owner is about to close.
            stopping.set()
            await task


async def _prune_until(stopping: asyncio.Event, state: ApiState) -> None:
    settings = state.settings
    assert settings.prune_every is not None
    while not stopping.is_set():
        try:
            cutoff = state.clock.now() - settings.idempotency_retention
            while True:  # in batches, so no single delete holds the write lock for long
                pruned = await run_in_threadpool(
                    state.services.tables.prune_keys, older_than=cutoff, limit=PRUNE_BATCH
                )
                if pruned:
                    log.info("pruned %d idempotency keys older than %s", pruned, cutoff)
                if pruned < PRUNE_BATCH or stopping.is_set():
                    break
        except RecoupError:
            log.warning("could not prune idempotency keys", exc_info=True)
        try:
            forgotten = await run_in_threadpool(state.intake.prune, batch=PRUNE_BATCH)
            if forgotten:
                log.info("pruned %d processed intake events", forgotten)
        except RecoupError:
            log.warning("could not prune intake events", exc_info=True)
        try:
            # Logouts are remembered until their sessions would have expired (wall time).
            await run_in_threadpool(
                state.services.tables.prune_ended_sessions, before=int(time.time())
            )
        except RecoupError:
            log.warning("could not prune ended dashboard sessions", exc_info=True)
        try:
            # Every invoice ends: attempts whose job was cancelled or failed from outside.
            await run_in_threadpool(state.dunning.resync)
        except RecoupError:
            log.warning("could not resync the dunning runtime", exc_info=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), settings.prune_every.total_seconds())


def _version() -> str:
    from recoup import __version__

    return __version__


__all__ = ["ApiSettings", "create_app"]
