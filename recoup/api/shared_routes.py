"""Routers included once per process, whose routes every app `create_app` makes then serves.

FastAPI works out an included route's handling (its dependencies, body and response fields)
once per include, at the first requests that reach it: ~100 ms of CPU for each new app, the
same every time. Included into a plain router instead of an app, the routes see no app's
`dependency_overrides` (Recoup sets none), and a router's startup and shutdown handlers would
reach no app: `include_once` refuses such a router rather than drop them."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.routing import BaseRoute


def include_once(*routers: APIRouter) -> tuple[BaseRoute, ...]:
    """The routes of `routers`, included in this order, for `app.router.routes.extend`."""
    into = APIRouter()
    for router in routers:
        into.include_router(router)
    if into.on_startup or into.on_shutdown:
        raise RuntimeError("a shared router has startup or shutdown handlers no app would run")
    return tuple(into.routes)
