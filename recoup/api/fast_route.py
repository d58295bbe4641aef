"""Routes with a fast path: an operation declared as any FastAPI route (its parameters, body
and responses, so /openapi.json states it exactly as before), whose requests are first offered
to a plain coroutine that reads the request itself, without FastAPI's dependency solving (about
two fifths of a job creation's CPU, measured: `docs/operations/performance.md`).

The fast handler answers the requests it is sure of (a cached token, a body that validates,
nothing unusual) and declines every other one by returning None: the route's FastAPI handler
then answers it as before, with every dependency and every problem+json it gives. Declining
is always correct, so the fast handler only has to be right about what it answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

FastHandler = Callable[[Request], Awaitable[Response | None]]


class FastPathRoute(APIRoute):
    """An `APIRoute` whose requests `fast` may answer first (a subclass per handler: see
    `with_fast_path`). Only the handler differs: the OpenAPI document reads the route's
    declaration, which is the parent's."""

    fast: FastHandler

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        full = super().get_route_handler()
        fast = type(self).fast

        async def handler(request: Request) -> Response:
            response = await fast(request)
            return await full(request) if response is None else response

        return handler


def with_fast_path(fast: FastHandler) -> type[APIRoute]:
    """The route class (`route_class_override`) of an operation that `fast` may answer."""
    return type(f"FastPathRoute_{fast.__name__}", (FastPathRoute,), {"fast": staticmethod(fast)})


__all__ = ["FastHandler", "FastPathRoute", "with_fast_path"]
