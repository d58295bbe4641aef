"""The bytes of a delivery on the wire, pinned: the request line, every header in its order,
the body. Receivers verify signatures over these bytes and some read headers positionally, so
a change to how the worker builds a request (issue 21's hot path) must leave them as they were.
The expected requests were captured from the worker before its delivery path was reworked."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.jobs.model import HttpTarget, Tenant
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.targets import HttpExecutor
from recoup.jobs.trace_context import TraceContext
from tests.jobs.support import SECRET
from tests.jobs.test_targets import make_job

SENT_AT = datetime(2026, 6, 1, 12, 0, 5, tzinfo=UTC)  # the signature's timestamp
OLD_SECRET = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
POLL = 0.02  # seconds between the capture server's checks for a shutdown
REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


class Capture:
    """A loopback server that records the raw bytes of each request and answers 200."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(POLL)  # so that `close` ends the accept loop promptly
        self.port = self.sock.getsockname()[1]
        self.closing = threading.Event()
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + rest)
                conn.sendall(REPLY)

    def close(self) -> None:
        self.closing.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def capture() -> Iterator[Capture]:
    found = Capture()
    yield found
    found.close()


def deliver(capture: Capture, target: HttpTarget, secret: Any = SECRET, **changes: Any) -> bytes:
    job = make_job(target, **changes)

    async def go() -> None:
        executor = HttpExecutor(guard=SsrfGuard(allow_private=True), wall_clock=lambda: SENT_AT)
        try:
            result = await executor.send(job, secret=secret)
            assert result.status_code == 200, result
        finally:
            await executor.aclose()

    asyncio.run(go())
    (request,) = capture.requests
    host = f"127.0.0.1:{capture.port}".encode()
    return request.replace(host, b"HOST")


def test_a_json_delivery_with_its_name_schedule_and_key(capture: Capture) -> None:
    target = HttpTarget(url=f"http://127.0.0.1:{capture.port}/hook", body={"invoice": "in_1"})
    sent = deliver(
        capture, target, idempotency_key="retry:in_1:2", schedule_id="nightly", attempts=2
    )
    assert sent == (
        b"POST /hook HTTP/1.1\r\n"
        b"Host: HOST\r\n"
        b"Content-Type: application/json\r\n"
        b"User-Agent: recoup/0.1\r\n"
        b"Idempotency-Key: retry:in_1:2\r\n"
        b"Recoup-Job-Id: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"Recoup-Attempt: 2\r\n"
        b"Recoup-Job-Name: invoice-42\r\n"
        b"Recoup-Schedule-Id: nightly\r\n"
        b"webhook-id: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"webhook-timestamp: 1780315205\r\n"
        b"webhook-signature: v1,JMK+Mm5tkqo66oKD4csip0hl8hQgOiEQ2elZ5vul2XI=\r\n"
        b"Accept: */*\r\n"
        b"Accept-Encoding: gzip, deflate\r\n"
        b"Content-Length: 18\r\n"
        b"\r\n"
        b'{"invoice":"in_1"}'
    )


def test_the_targets_own_headers_come_first_and_its_trace_gives_way_to_the_jobs(
    capture: Capture,
) -> None:
    target = HttpTarget(
        url=f"http://127.0.0.1:{capture.port}/hook?x=1",
        method="put",
        headers={
            "X-Tenant": "acme",
            "content-type": "text/plain; charset=utf-8",
            "user-agent": "billing/2",
            "TraceParent": "00-11111111111111111111111111111111-2222222222222222-01",
        },
        body="plain text",
    )
    trace = TraceContext("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "vendor=opaque")
    rotating = Tenant(
        id="acme",
        name="Acme",
        signing_secret=SECRET,
        created_at=SENT_AT - timedelta(days=1),
        previous_signing_secret=OLD_SECRET,
        previous_secret_until=SENT_AT + timedelta(hours=1),
    )
    sent = deliver(capture, target, secret=rotating, trace=trace, name="reçu inv/42")
    assert sent == (
        b"PUT /hook?x=1 HTTP/1.1\r\n"
        b"Host: HOST\r\n"
        b"X-Tenant: acme\r\n"
        b"content-type: text/plain; charset=utf-8\r\n"
        b"user-agent: billing/2\r\n"
        b"Idempotency-Key: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"Recoup-Job-Id: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"Recoup-Attempt: 1\r\n"
        b"Recoup-Job-Name: re%C3%A7u%20inv%2F42\r\n"
        b"traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n"
        b"tracestate: vendor=opaque\r\n"
        b"webhook-id: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"webhook-timestamp: 1780315205\r\n"
        b"webhook-signature: v1,NCM/obTOhumiQPtb8mQieeNbIL5/XLbEco0/6rNHd3c="
        b" v1,J1oXA127v9rsV6A7zhK+pksg8w2Z1NBUMs3Kuh7urzc=\r\n"
        b"Accept: */*\r\n"
        b"Accept-Encoding: gzip, deflate\r\n"
        b"Content-Length: 10\r\n"
        b"\r\n"
        b"plain text"
    )


def test_an_unsigned_bodiless_get(capture: Capture) -> None:
    target = HttpTarget(url=f"http://127.0.0.1:{capture.port}/ping", method="GET")
    sent = deliver(capture, target, secret=None, name=None)
    assert sent == (
        b"GET /ping HTTP/1.1\r\n"
        b"Host: HOST\r\n"
        b"User-Agent: recoup/0.1\r\n"
        b"Idempotency-Key: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"Recoup-Job-Id: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"Recoup-Attempt: 1\r\n"
        b"webhook-id: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"Accept: */*\r\n"
        b"Accept-Encoding: gzip, deflate\r\n"
        b"\r\n"
    )


def test_a_qstash_delivery(capture: Capture) -> None:
    target = HttpTarget(url=f"http://127.0.0.1:{capture.port}/q", body={"a": 1}, delivery="qstash")
    sent = deliver(capture, target, name=None)
    # QStash's JWT names the URL (its port changes per run) and a fresh token id: its place
    # and shape are pinned here, its claims in tests/jobs/test_qstash_signing.py.
    head, jwt, tail = re.split(rb"(?<=Upstash-Signature: )([\w.-]+)", sent)
    assert jwt.count(b".") == 2
    assert head + b"JWT" + tail == (
        b"POST /q HTTP/1.1\r\n"
        b"Host: HOST\r\n"
        b"Content-Type: application/json\r\n"
        b"User-Agent: Upstash-QStash\r\n"
        b"Idempotency-Key: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"Recoup-Job-Id: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"Recoup-Attempt: 1\r\n"
        b"webhook-id: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"webhook-timestamp: 1780315205\r\n"
        b"webhook-signature: v1,/Q3atZL7YLX+Z5LeT+IESytuSRzaO2meZOJjDu8m40Q=\r\n"
        b"Upstash-Signature: JWT\r\n"
        b"Upstash-Message-Id: 0190f0f0-0000-7000-8000-000000000001\r\n"
        b"Upstash-Retried: 0\r\n"
        b"Accept: */*\r\n"
        b"Accept-Encoding: gzip, deflate\r\n"
        b"Content-Length: 7\r\n"
        b"\r\n"
        b'{"a":1}'
    )
