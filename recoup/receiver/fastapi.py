"""Mounting a `ChargeEndpoint` on FastAPI (or any Starlette app): one POST route.

    from fastapi import FastAPI
    from recoup.receiver import ChargeEndpoint, SqliteDatabase
    from recoup.receiver.fastapi import charge_router

    database = SqliteDatabase("billing.db")
    database.ensure_schema()
    endpoint = ChargeEndpoint(
        database=database, provider=gateway, invoices=MyInvoices(), secret="whsec_…"
    )
    app = FastAPI()
    app.include_router(charge_router(endpoint, path="/recoup/charge"))

The route reads the raw body (the signature covers the exact bytes, never a re-serialised
JSON) and runs the endpoint in Starlette's thread pool, because a charge blocks on the
database lock and on the provider.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from recoup.receiver.endpoint import ChargeEndpoint
from recoup.timekeeping.clock import Clock, SystemClock


def charge_router(
    endpoint: ChargeEndpoint[Any], *, path: str = "/charge", clock: Clock | None = None
) -> APIRouter:
    """A router with `POST {path}` answered by `endpoint`. `clock` gives the instant of
    receipt (the system clock unless a test freezes it)."""
    source = clock if clock is not None else SystemClock()
    router = APIRouter()

    @router.post(path, summary="Charge one retry of an invoice (called by Recoup)")
    async def charge(request: Request) -> Response:
        body = await request.body()
        headers = dict(request.headers)  # lower-case names, as Starlette gives them
        answer = await run_in_threadpool(endpoint.handle, headers, body, now=source.now())
        return Response(
            content=answer.body, status_code=answer.status, headers=dict(answer.headers)
        )

    return router


__all__ = ["charge_router"]
