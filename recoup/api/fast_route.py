"""Routes with a fast path, and the app that offers them their requests first.

A fast-path route is an operation declared as any FastAPI route (its parameters, body and
responses, so /openapi.json states it exactly as before), whose requests are first offered
to a plain coroutine that reads the request itself, without FastAPI's dependency solving
(about two fifths of a job creation's CPU, measured: `docs/benchmarks.md`).

The fast handler answers the requests it is sure of (a cached token, a body that validates,
nothing unusual) and declines every other one by returning None: the route's FastAPI handler
then answers it as before, with every dependency and every problem+json it gives. Declining
is always correct, so the fast handler only has to be right about what it answers.

`FastPathApp` offers a fast-path route at a fixed path its requests before the middleware stack
and the router (a sixth of a job creation's CPU in process, `bench/api_cpu.py --in-process`):
the route is known by the path alone, as `fast_lane` keeps only the paths no other POST route
matches; it reads a body whose `Content-Length` is within the limit, and answers with what the
middleware would have made of the fast handler's answer: the request counted in the metrics
under the route's template, an exception the app's handlers know as their problem+json, any
other as the logged bare 500. Whatever the fast handler declines, and every request it does not
take (another route, no or too large a `Content-Length`, a body cut short), goes through the
whole app with its body given again, exactly as if the fast lane were not there.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, APIRouter
from prometheus_client import Counter, Histogram
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Message, Receive, Scope, Send

from recoup.api.problems import INTERNAL_ERROR, log, problem_response

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


class FastPathApp(FastAPI):
    """A FastAPI app whose fast-path routes at fixed paths (`lane`, from `fast_lane`) get
    their POSTs before its middleware (see the module). `app.state.api` must be the
    `ApiState` (its metrics and body limit)."""

    lane: Mapping[str, FastPathRoute] = {}
    _series_of: object = None  # the metrics whose series `_known_series` holds
    _known_series: dict[tuple[str, int], tuple[Counter, Histogram]]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.lane.get(scope["path"]) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST" or self.root_path:
            await super().__call__(scope, receive, send)
            return
        read, body = await _read_body(scope, receive, self.state.api.settings.max_body_bytes)
        if body is None:
            await super().__call__(scope, _given_again(read, receive), send)
            return
        begun = time.perf_counter()
        scope["app"] = self
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = {}
        request = Request(scope, _given_again(read, receive))
        try:
            response = await type(route).fast(request)
        except Exception as exc:  # answered as the middleware and its handlers would
            response = await self._answer_error(request, exc)
        if response is None:  # the whole app answers it, reading the body afresh
            await super().__call__(scope, _given_again(read, receive), send)
            return
        await response(scope, receive, send)
        counted, timed = self._series(route.path, response.status_code)
        counted.inc()
        timed.observe(time.perf_counter() - begun)

    def _series(self, template: str, status: int) -> tuple[Counter, Histogram]:
        """The request counter's and the latency histogram's series of `template` and `status`,
        kept once found (`labels` checks and locks on every call)."""
        metrics = self.state.api.metrics
        if self._series_of is not metrics:
            self._series_of, self._known_series = metrics, {}
        found = self._known_series.get((template, status))
        if found is None:
            found = (
                metrics.http_requests.labels("POST", template, str(status)),
                metrics.http_duration.labels(template),
            )
            self._known_series[(template, status)] = found
        return found

    async def _answer_error(self, request: Request, exc: Exception) -> Response:
        """What the app's handlers answer for `exc`, else the logged bare 500."""
        for kind in type(exc).__mro__:
            handler = self.exception_handlers.get(kind)
            if handler is not None and kind is not Exception:
                if inspect.iscoroutinefunction(handler):
                    answer = await handler(request, exc)
                else:
                    answer = await run_in_threadpool(handler, request, exc)
                assert isinstance(answer, Response)
                return answer
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return problem_response(INTERNAL_ERROR)


def fast_lane(routers: Sequence[APIRouter]) -> dict[str, FastPathRoute]:
    """The fast-path POST routes of `routers` at a fixed path, by that path: those the
    router finds by the path alone, as no other POST route of `routers` matches it (a
    route at a path with parameters keeps its fast path inside the router)."""
    posts = [
        route
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute) and "POST" in (route.methods or ())
    ]
    lane = {}
    for route in posts:
        if not isinstance(route, FastPathRoute) or route.param_convertors:
            continue
        scope = {"type": "http", "method": "POST", "path": route.path, "root_path": ""}
        matching = [other for other in posts if other.matches(scope)[0] is Match.FULL]
        if matching == [route]:
            lane[route.path] = route
    return lane


async def _read_body(
    scope: Scope, receive: Receive, limit: int
) -> tuple[list[Message], bytes | None]:
    """The messages read of the request, and its body when it declares its length within
    `limit` and arrives whole (nothing is read when it declares no length or too much)."""
    declared = None
    for name, value in scope["headers"]:
        if name == b"content-length":
            if declared is not None:
                return [], None
            declared = value
    if declared is None or not declared.isdigit() or int(declared) > limit:
        return [], None
    read: list[Message] = []
    size = 0
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            return read, None  # the client went away: the whole app sees it as before
        size += len(message.get("body", b""))
        if size > limit:
            return read, None
        if not message.get("more_body", False):
            break
    return read, b"".join(message.get("body", b"") for message in read)


def _given_again(read: list[Message], receive: Receive) -> Receive:
    """`receive` with the messages already read given first, in their order."""
    if not read:
        return receive
    pending = list(read)

    async def again() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return again


__all__ = ["FastHandler", "FastPathApp", "FastPathRoute", "fast_lane", "with_fast_path"]
