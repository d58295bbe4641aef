"""Targets: outcome classification, and one HTTP attempt against a real local receiver."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from standardwebhooks import Webhook

from recoup.jobs.handler_attempts import run_handler, run_inline
from recoup.jobs.handlers import HandlerContext, HandlerRegistry, PermanentError
from recoup.jobs.model import (
    RESPONSE_EXCERPT_LIMIT,
    BackoffPolicy,
    HttpTarget,
    Job,
    JobState,
    PythonTarget,
)
from recoup.jobs.ssrf import SsrfGuard, TargetRefused
from recoup.jobs.targets import (
    AttemptOutcome,
    AttemptResult,
    HttpExecutor,
    classify_exception,
    classify_status,
    encode_body,
    tls_context,
)
from tests.jobs.support import SECRET, Receiver, Reply

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def make_job(target: Any, **changes: Any) -> Job:
    fields: dict[str, Any] = {
        "id": "0190f0f0-0000-7000-8000-000000000001",
        "tenant": "acme",
        "name": "invoice-42",
        "run_at": NOW,
        "target": target,
        "payload": None,
        "idempotency_key": None,
        "retry": BackoffPolicy(),
        "timeout": timedelta(seconds=5),
        "keep_for": None,
        "schedule_id": None,
        "state": JobState.RUNNING,
        "attempts": 1,
        "lease_expires_at": None,
        "leased_by": "w",
        "last_error": None,
        "created_at": NOW,
        "updated_at": NOW,
        "finished_at": None,
    }
    fields.update(changes)
    return Job(**fields)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, AttemptOutcome.SUCCEEDED),
        (201, AttemptOutcome.SUCCEEDED),
        (204, AttemptOutcome.SUCCEEDED),
        (299, AttemptOutcome.SUCCEEDED),
        (408, AttemptOutcome.RETRY),  # request timeout
        (429, AttemptOutcome.RETRY),  # too many requests
        (500, AttemptOutcome.RETRY),
        (502, AttemptOutcome.RETRY),
        (503, AttemptOutcome.RETRY),
        (599, AttemptOutcome.RETRY),
        (400, AttemptOutcome.FAILED),  # the request is wrong; sending it again will not help
        (401, AttemptOutcome.FAILED),
        (404, AttemptOutcome.FAILED),
        (409, AttemptOutcome.FAILED),
        (422, AttemptOutcome.FAILED),
        (301, AttemptOutcome.FAILED),  # redirects are not followed (SSRF)
        (304, AttemptOutcome.FAILED),
        (101, AttemptOutcome.FAILED),
    ],
)
def test_status_classification(status: int, outcome: AttemptOutcome) -> None:
    assert classify_status(status) is outcome


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (aiohttp.ClientConnectionError("refused"), AttemptOutcome.RETRY),
        (aiohttp.ServerTimeoutError("slow"), AttemptOutcome.RETRY),
        (aiohttp.ServerDisconnectedError("reset"), AttemptOutcome.RETRY),
        (TimeoutError(), AttemptOutcome.RETRY),
        (OSError("name does not resolve"), AttemptOutcome.RETRY),
        (TargetRefused("http://10.0.0.1/", "private", "…"), AttemptOutcome.FAILED),
        (aiohttp.NonHttpUrlClientError("gopher://x"), AttemptOutcome.FAILED),
        (ValueError("bad"), AttemptOutcome.FAILED),
    ],
)
def test_exception_classification(exc: BaseException, outcome: AttemptOutcome) -> None:
    assert classify_exception(exc) is outcome


def test_bodies_are_sent_as_is_when_text_and_as_compact_json_otherwise() -> None:
    assert encode_body("a=1&b=2") == ("a=1&b=2", None)
    assert encode_body(None) == ("", None)
    assert encode_body({"amount": 1200, "note": "é"}) == (
        '{"amount":1200,"note":"é"}',
        "application/json",
    )


def send(job: Job, *, secret: str | None = SECRET, guard: SsrfGuard | None = None) -> AttemptResult:
    async def go() -> AttemptResult:
        executor = HttpExecutor(
            guard=guard or SsrfGuard(allow_private=True), wall_clock=lambda: datetime.now(UTC)
        )
        try:
            return await executor.send(job, secret=secret)
        finally:
            await executor.aclose()

    return asyncio.run(go())


def test_a_request_carries_a_verifiable_signature_and_the_idempotency_key(
    receiver: Receiver,
) -> None:
    target = HttpTarget(url=receiver.url, headers={"X-Custom": "1"}, body={"invoice": "inv_42"})
    result = send(make_job(target, idempotency_key="retry:inv_42:1"))
    assert result.outcome is AttemptOutcome.SUCCEEDED
    assert result.status_code == 200
    assert result.response_excerpt == "ok"
    (request,) = receiver.requests
    assert request.method == "POST"
    assert request.headers["x-custom"] == "1"
    assert request.headers["idempotency-key"] == "retry:inv_42:1"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["webhook-id"] == "0190f0f0-0000-7000-8000-000000000001"
    verified = Webhook(SECRET).verify(request.body, request.headers)
    assert verified == {"invoice": "inv_42"}


def test_a_string_body_is_signed_and_sent_byte_for_byte(receiver: Receiver) -> None:
    target = HttpTarget(url=receiver.url, headers={"Content-Type": "text/plain"}, body="héllo")
    send(make_job(target))
    (request,) = receiver.requests
    assert request.body == "héllo".encode()
    Webhook(SECRET).verify(request.body, request.headers, json_parse=False)


def test_a_string_body_without_a_content_type_goes_out_without_one(receiver: Receiver) -> None:
    send(make_job(HttpTarget(url=receiver.url, body="plain words")))
    (request,) = receiver.requests
    assert request.body == b"plain words"
    assert "content-type" not in request.headers  # not labelled application/octet-stream


def test_without_a_body_the_payload_is_sent(receiver: Receiver) -> None:
    send(make_job(HttpTarget(url=receiver.url), payload={"n": 1}))
    assert json.loads(receiver.requests[0].body) == {"n": 1}


def test_server_errors_are_retryable_and_keep_retry_after(receiver: Receiver) -> None:
    receiver.reply(Reply(503, {"Retry-After": "42"}, b"busy"))
    result = send(make_job(HttpTarget(url=receiver.url)))
    assert result.outcome is AttemptOutcome.RETRY
    assert result.status_code == 503
    assert result.retry_after == timedelta(seconds=42)
    assert result.error == "HTTP 503"
    assert result.response_excerpt == "busy"


def test_client_errors_fail(receiver: Receiver) -> None:
    receiver.reply(Reply(404, body=b"no such hook"))
    result = send(make_job(HttpTarget(url=receiver.url)))
    assert result.outcome is AttemptOutcome.FAILED
    assert result.status_code == 404


def test_the_response_excerpt_is_bounded(receiver: Receiver) -> None:
    receiver.reply(Reply(200, body=b"x" * 100_000))
    result = send(make_job(HttpTarget(url=receiver.url)))
    assert result.response_excerpt is not None
    assert len(result.response_excerpt) == RESPONSE_EXCERPT_LIMIT


def test_a_slow_target_times_out_and_is_retryable(receiver: Receiver) -> None:
    receiver.reply(Reply(200, delay=2.0))
    result = send(make_job(HttpTarget(url=receiver.url), timeout=timedelta(seconds=0.3)))
    assert result.outcome is AttemptOutcome.RETRY
    assert result.error is not None and "timed out" in result.error.lower()
    assert result.duration_ms < 1500


def test_a_body_that_stalls_after_the_headers_times_out_too() -> None:
    # Headers at once, then 10 of the 100 bytes announced, then nothing: the job's deadline
    # covers reading the response as well as waiting for it.
    release = threading.Event()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
                release.wait(30)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{server.getsockname()[1]}/hook"
        try:
            result = send(make_job(HttpTarget(url=url), timeout=timedelta(seconds=0.3)))
        finally:
            release.set()
            thread.join(10)
    assert result.outcome is AttemptOutcome.RETRY
    assert result.error is not None and "timed out" in result.error.lower()
    assert result.duration_ms < 1500


def test_a_refused_connection_is_retryable() -> None:
    result = send(make_job(HttpTarget(url="http://127.0.0.1:9/x")))
    assert result.outcome is AttemptOutcome.RETRY
    assert result.error is not None


def test_the_guard_refuses_at_send_time_and_the_attempt_fails(receiver: Receiver) -> None:
    result = send(make_job(HttpTarget(url=receiver.url)), guard=SsrfGuard())
    assert result.outcome is AttemptOutcome.FAILED
    assert result.error is not None and "loopback" in result.error
    assert receiver.requests == []


def test_an_allow_listed_name_is_connected_to_at_its_checked_address(receiver: Receiver) -> None:
    guard = SsrfGuard(allowed_cidrs=["127.0.0.0/8", "::1/128"])
    url = f"http://localhost:{receiver.port}/hook"
    result = send(make_job(HttpTarget(url=url)), guard=guard)
    assert result.outcome is AttemptOutcome.SUCCEEDED, result.error
    assert receiver.requests[0].headers["host"] == f"localhost:{receiver.port}"


def test_every_connection_is_checked_even_one_the_url_check_would_pass(
    receiver: Receiver,
) -> None:
    # A name that resolved to a public address when the job was created, and to a private one
    # now (DNS rebinding), is refused when the client connects.
    result = send(make_job(HttpTarget(url=f"http://localhost:{receiver.port}/")), guard=SsrfGuard())
    assert result.outcome is AttemptOutcome.FAILED
    assert result.error is not None and "TargetRefused" in result.error
    assert receiver.requests == []


def test_handlers_succeed_fail_permanently_or_retry() -> None:
    registry = HandlerRegistry()
    seen: list[HandlerContext] = []

    @registry.register("ok")
    def ok(ctx: HandlerContext) -> str:
        seen.append(ctx)
        return "done"

    @registry.register("flaky")
    async def flaky(ctx: HandlerContext) -> None:
        raise RuntimeError("try again")

    @registry.register("hopeless")
    def hopeless(ctx: HandlerContext) -> None:
        raise PermanentError("card stolen")

    def run(name: str) -> AttemptResult:
        job = make_job(PythonTarget(handler=name), payload={"x": 1}, idempotency_key="k")
        return asyncio.run(run_handler(registry, name, job))

    assert run("ok").outcome is AttemptOutcome.SUCCEEDED
    assert run("ok").response_excerpt == "done"
    assert seen[0].payload == {"x": 1} and seen[0].idempotency_key == "k" and seen[0].attempt == 1
    assert run("flaky").outcome is AttemptOutcome.RETRY
    assert run("hopeless").outcome is AttemptOutcome.FAILED
    assert run("missing").outcome is AttemptOutcome.RETRY


def test_inline_handlers_run_without_the_loop() -> None:
    registry = HandlerRegistry()
    registry.add("noop", lambda ctx: None, inline=True)
    registry.add("threaded", lambda ctx: None)
    job = make_job(PythonTarget(handler="noop"))
    result = run_inline(registry, "noop", job)
    assert result is not None and result.outcome is AttemptOutcome.SUCCEEDED
    assert run_inline(registry, "threaded", job) is None


def test_every_delivery_says_which_job_attempt_and_schedule_it_is(receiver: Receiver) -> None:
    target = HttpTarget(url=receiver.url, body={"n": 1})
    send(make_job(target, attempts=3, name="reçu inv/42", schedule_id="nightly"))
    (request,) = receiver.requests
    headers = request.headers
    assert headers["recoup-job-id"] == "0190f0f0-0000-7000-8000-000000000001"
    assert headers["recoup-attempt"] == "3"
    assert headers["recoup-job-name"] == "re%C3%A7u%20inv%2F42"
    assert headers["recoup-schedule-id"] == "nightly"


def test_a_job_without_a_key_is_delivered_under_its_id(receiver: Receiver) -> None:
    send(make_job(HttpTarget(url=receiver.url), idempotency_key=None, name=None))
    (request,) = receiver.requests
    assert request.headers["idempotency-key"] == "0190f0f0-0000-7000-8000-000000000001"
    assert "recoup-job-name" not in request.headers
    assert "recoup-schedule-id" not in request.headers


def test_guarded_clients_share_one_tls_context_that_verifies_host_names() -> None:
    # Built once per process: a client made per request (the dunning runtime's charge
    # requests outside a worker) used to load the CA bundle every time.
    context = tls_context()
    assert context is tls_context()
    assert context.check_hostname and context.verify_mode is ssl.CERT_REQUIRED
