"""The fast lane (`recoup.api.fast_route.FastPathApp`): the fixed-path fast POSTs answered
before the middleware and the router, with the same answers, metrics and problems; whatever
the lane does not take goes through the whole app, its body given again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import APIRouter
from starlette.types import ASGIApp, Receive, Scope, Send

from recoup.api.app import create_app
from recoup.api.fast_route import FastPathApp, fast_lane, with_fast_path
from recoup.errors import StorageError
from recoup.storage import Store, open_api_tables
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import TARGET, api_settings

BODY = {"target": {"url": TARGET, "body": {"invoice": "in_1"}}, "delay_seconds": 3600}


class Seen:
    """A middleware that notes the path of every HTTP request it is given."""

    paths: list[tuple[str, str]]

    def __init__(self, app: ASGIApp, paths: list[tuple[str, str]]) -> None:
        self.app = app
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.paths.append((scope["method"], scope["path"]))
        await self.app(scope, receive, send)


def _app(store: Store) -> tuple[FastPathApp, dict[str, str], list[tuple[str, str]]]:
    """The app over `store`, a tenant's auth header, and the requests its middleware saw."""
    app = create_app(store, clock=SystemClock(), settings=api_settings())
    assert isinstance(app, FastPathApp)
    now = SystemClock().now()
    store.ensure_tenant(new_tenant("lane", now=now))
    token = issue_token(open_api_tables(store), "lane", now=now).secret
    seen: list[tuple[str, str]] = []
    app.add_middleware(Seen, paths=seen)
    return app, {"Authorization": f"Bearer {token}"}, seen


def _sent(app: FastPathApp, requests: list[dict[str, Any]]) -> list[httpx.Response]:
    async def send_all() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lane") as http:
            return [await http.request(**request) for request in requests]

    return asyncio.run(send_all())


def _requests_counted(app: FastPathApp, status: str) -> float:
    metrics = app.state.api.metrics
    labels = {"method": "POST", "route": "/v1/jobs", "status": status}
    return metrics.registry.get_sample_value("recoup_http_requests_total", labels) or 0.0


def test_the_usual_post_is_answered_before_the_middleware_and_counted_by_its_route(
    store: Store,
) -> None:
    app, auth, seen = _app(store)
    warm, created, replay = _sent(
        app,
        [
            # The first request reads the token; once cached, the lane answers.
            {"method": "POST", "url": "/v1/jobs", "json": BODY, "headers": auth},
            {"method": "POST", "url": "/v1/jobs", "json": BODY, "headers": auth | KEY},
            {"method": "POST", "url": "/v1/jobs", "json": BODY, "headers": auth | KEY},
        ],
    )
    assert (warm.status_code, created.status_code) == (201, 201)
    assert seen == [("POST", "/v1/jobs")]  # only the first, which the lane declined
    assert replay.status_code == 201
    assert replay.json() == created.json()
    assert store.get("lane", created.json()["id"]) is not None
    assert _requests_counted(app, "201") == 3


KEY = {"Idempotency-Key": "lane-1"}
JSON = {"Content-Type": "application/json"}


def test_what_the_lane_does_not_take_goes_through_the_whole_app_with_its_body(
    store: Store,
) -> None:
    app, auth, seen = _app(store)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"target": {"url": "' + TARGET.encode() + b'"},'
        yield b' "delay_seconds": 60}'

    warm, chunked, invalid, listed = _sent(
        app,
        [
            {"method": "POST", "url": "/v1/jobs", "json": BODY, "headers": auth},
            # No Content-Length: the lane reads nothing and the whole app reads the chunks.
            {"method": "POST", "url": "/v1/jobs", "content": chunks(), "headers": auth | JSON},
            # Read by the lane, declined, and read again by the declared route.
            {
                "method": "POST",
                "url": "/v1/jobs",
                "json": {**BODY, "delay_seconds": -1},
                "headers": auth,
            },
            {"method": "GET", "url": "/v1/jobs", "headers": auth},
        ],
    )
    assert warm.status_code == 201
    assert chunked.status_code == 201, chunked.text
    assert invalid.status_code == 422
    assert invalid.headers["content-type"] == "application/problem+json"
    assert any(error["field"] == "delay_seconds" for error in invalid.json()["errors"])
    assert listed.status_code == 200
    assert len(listed.json()["jobs"]) == 2
    assert seen == [("POST", "/v1/jobs")] * 3 + [("GET", "/v1/jobs")]
    assert _requests_counted(app, "422") == 1


def test_an_error_in_the_lane_is_answered_as_the_apps_handlers_and_catch_all_answer(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    app, auth, seen = _app(store)
    tables = app.state.api.services.tables
    post = {"method": "POST", "url": "/v1/jobs", "json": BODY, "headers": auth}
    _sent(app, [post])  # the token cached
    errors: list[Exception] = [StorageError("the store is away"), RuntimeError("a bug")]

    def failing(*args: Any) -> Any:
        raise errors.pop(0)

    monkeypatch.setattr(tables, "create_job", failing)
    with caplog.at_level(logging.ERROR, logger="recoup.api"):
        known, unknown = _sent(app, [post, post])
    assert known.headers["content-type"] == "application/problem+json"
    assert known.status_code == 503, known.text
    assert unknown.status_code == 500
    assert unknown.json()["type"].endswith("internal-error")
    assert "a bug" not in unknown.text
    assert any("unhandled error on POST /v1/jobs" in r.getMessage() for r in caplog.records)
    assert seen == [("POST", "/v1/jobs")]
    assert _requests_counted(app, "500") == 1


def test_the_lane_holds_only_fast_paths_that_no_other_post_route_also_matches() -> None:
    async def never(request: object) -> None:
        return None

    def endpoint() -> None:
        return None

    alone, shared = APIRouter(), APIRouter()
    fast = with_fast_path(never)
    alone.add_api_route("/v1/alone", endpoint, methods=["POST"], route_class_override=fast)
    alone.add_api_route("/v1/{anything}/b", endpoint, methods=["POST"])
    alone.add_api_route("/v1/with/{x}", endpoint, methods=["POST"], route_class_override=fast)
    shared.add_api_route("/v1/shared", endpoint, methods=["POST"], route_class_override=fast)
    shared.add_api_route("/v1/{anything}", endpoint, methods=["POST"])  # /v1/alone too
    assert sorted(fast_lane([alone])) == ["/v1/alone"]
    assert fast_lane([alone, shared]) == {}
