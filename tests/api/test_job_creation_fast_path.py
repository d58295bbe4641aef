"""`POST /v1/jobs`'s fast path (`recoup.api.routes.job_creation`): the same document, the same
answers, no read of the token on each request, and a revoked token refused by the very next
request, whichever process revoked it, on both backends."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from recoup.api.app import create_app
from recoup.api.fast_route import FastPathRoute
from recoup.api.routes import dunning as dunning_routes
from recoup.api.routes import jobs as job_routes
from recoup.jobs.ssrf import SsrfGuard
from recoup.storage import open_api_tables
from recoup.tenancy import disable_tenant
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import TARGET, Api, api_settings
from tests.api.fast_path_probes import on_the_loop, token_reads
from tests.storage.conftest import Backend

BODY = {"target": {"url": TARGET, "body": {"invoice": "in_1"}}, "delay_seconds": 3600}


def _plain(route: FastPathRoute) -> APIRoute:
    """The route as `@router.post` declares it, without the fast path."""
    return APIRoute(
        route.path,
        route.endpoint,
        methods=sorted(route.methods),
        status_code=route.status_code,
        response_model=route.response_model,
        responses=route.responses,
        tags=route.tags,
        dependencies=route.dependencies,
        name=route.name,
    )


def test_the_fast_path_leaves_the_openapi_document_byte_for_byte_as_declared(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = httpx.get(f"{api.url}/openapi.json").content
    fast = [route for route in job_routes.router.routes if isinstance(route, FastPathRoute)]
    assert [route.path for route in fast] == ["/v1/jobs"]
    for router in (job_routes.router, dunning_routes.router):  # the /v1 routers with one
        plain = [_plain(r) if isinstance(r, FastPathRoute) else r for r in router.routes]
        monkeypatch.setattr(router, "routes", plain)
    without = create_app(api.store, clock=SystemClock(), settings=api_settings())
    declared = json.dumps(without.openapi(), ensure_ascii=False, separators=(",", ":")).encode()
    assert served == declared


def test_a_cached_token_is_not_read_again_for_each_job(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = api.tenant()
    http = api.http(caller)
    reads = token_reads(api, monkeypatch)
    for n in range(5):
        answer = http.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": f"k-{n}"})
        assert answer.status_code == 201, answer.text
    assert len(reads) == 1  # the first request, which filled the cache
    # A replay on the fast path is the first answer, byte for byte.
    again = http.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": "k-4"})
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == answer.json()
    assert len(reads) == 1


def test_what_the_fast_path_declines_is_answered_as_the_declared_route_answers(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    assert http.post("/v1/jobs", json=BODY).status_code == 201  # the token is cached now
    invalid = http.post("/v1/jobs", json={**BODY, "delay_seconds": -1})
    assert invalid.status_code == 422
    assert invalid.headers["content-type"] == "application/problem+json"
    assert any(error["field"] == "delay_seconds" for error in invalid.json()["errors"])
    unknown = http.post("/v1/jobs?verbose=1", json=BODY)
    assert unknown.status_code == 400
    assert "verbose" in unknown.json()["detail"]
    bad_key = http.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": "a b"})
    assert bad_key.status_code == 400
    assert bad_key.json()["type"].endswith("invalid-idempotency-key")
    text = {"Content-Type": "text/plain"}
    as_text = http.post("/v1/jobs", content=json.dumps(BODY), headers=text)
    assert as_text.status_code == 415
    stranger = httpx.post(
        f"{api.url}/v1/jobs", json=BODY, headers={"Authorization": "Bearer rcp_unknown"}
    )
    assert stranger.status_code == 401


@pytest.mark.parametrize("change", ["revoke", "disable"])
def test_a_token_revoked_while_requests_run_is_refused_by_the_next_request(
    api: Api, backend: Backend, change: str
) -> None:
    """Clients create jobs back to back; another process's store (its own connections, as the
    CLI's `recoup tokens revoke` has) revokes the token, or disables the tenant. Every request
    sent after that returned is refused: none of them creates a job."""
    caller = api.tenant()
    token_id = api.tables.list_tokens(caller.tenant)[0].id
    stop = threading.Event()
    answers: list[tuple[float, float, int]] = []  # (sent, answered, status)
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(base_url=api.url, headers=caller.auth, timeout=30.0) as http:
            while not stop.is_set():
                sent = time.monotonic()
                status = http.post(
                    "/v1/jobs", json=BODY, headers={"Idempotency-Key": uuid.uuid4().hex}
                ).status_code
                with lock:
                    answers.append((sent, time.monotonic(), status))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        while True:  # under load, the fast path taken (the token cached)
            with lock:
                if sum(status == 201 for _, _, status in answers) >= 20:
                    break
            time.sleep(0.01)
        other = backend.open()  # another process's store
        now = SystemClock().now()
        if change == "revoke":
            assert open_api_tables(other).revoke_token(token_id, now=now) is not None
        else:
            assert disable_tenant(other, caller.tenant, now=now) is not None
        changed = time.monotonic()
        time.sleep(0.3)  # requests go on after the change
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    after = [status for sent, _, status in answers if sent > changed]
    assert after, "no request was sent after the change"
    refused = 401 if change == "revoke" else 403
    assert set(after) == {refused}, after
    assert sum(status == 201 for _, _, status in answers) >= 20
    # Every job created was answered before the change or raced it (sent before it).
    created = [sent for sent, _, status in answers if status == 201]
    assert max(created) < changed


def test_a_stale_owner_is_read_again_and_a_token_still_valid_goes_on(api: Api) -> None:
    """Another token's revocation moves the epoch for every cached owner: the next request of
    a token still valid is answered the slow way once, then cached again."""
    caller = api.tenant()
    other = api.tenant()
    http = api.http(caller)
    assert http.post("/v1/jobs", json=BODY).status_code == 201
    other_id = api.tables.list_tokens(other.tenant)[0].id
    api.tables.revoke_token(other_id, now=SystemClock().now() + timedelta(seconds=1))
    assert http.post("/v1/jobs", json=BODY).status_code == 201
    cached = api.app.state.api.tokens.cached(f"Bearer {caller.token}")
    assert cached is not None
    assert cached.epoch == api.tables.token_epoch()


def test_the_usual_job_is_created_in_a_thread_never_on_the_event_loop(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    http = api.http(api.tenant())
    assert http.post("/v1/jobs", json=BODY).status_code == 201  # the token is cached now
    seen = on_the_loop(api.app.state.api.services.tables, "create_job", monkeypatch)
    for key in (None, "loop-1"):
        headers = {} if key is None else {"Idempotency-Key": key}
        assert http.post("/v1/jobs", json=BODY, headers=headers).status_code == 201
    # A statement waiting on the loop would stop every other request (and SQLite's group
    # commit could batch nothing): the unit takes its one hop to the thread pool.
    assert seen == [False, False]


def test_a_target_whose_name_the_guard_looks_up_is_looked_up_and_created_in_a_thread(
    make_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = make_api(ssrf=SsrfGuard())  # names resolved at creation: a look-up may take seconds
    looked_up: list[str] = []
    real = socket.getaddrinfo  # the module's own: the test's client looks the server up too

    def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host != "hooks.example.com":
            return real(host, port, *args, **kwargs)
        looked_up.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 443))]

    monkeypatch.setattr("recoup.jobs.ssrf.socket.getaddrinfo", getaddrinfo)
    http = api.http(api.tenant())
    named = {**BODY, "target": {"url": "https://hooks.example.com/in"}}
    assert http.post("/v1/jobs", json=named).status_code == 201  # the token is cached now
    seen = on_the_loop(api.app.state.api.services.tables, "create_job", monkeypatch)
    assert http.post("/v1/jobs", json=named).status_code == 201
    literal = {**BODY, "target": {"url": "https://93.184.216.34/in"}}
    assert http.post("/v1/jobs", json=literal).status_code == 201
    assert seen == [False, False]
    assert looked_up == ["hooks.example.com"] * 2
