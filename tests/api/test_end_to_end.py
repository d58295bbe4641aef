"""End to end: `recoup serve` (API and worker in one process) on a free port, a tenant made
with `recoup tenants create`, a receiver on 127.0.0.1 that fails twice then succeeds, and
the Python client scheduling a job for now + 1 s: the run log shows three attempts, and the
receiver verified the Standard Webhooks signature of each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from standardwebhooks import Webhook

from recoup.client import Client
from tests.storage.conftest import Backend, Store
from tests.support import free_socket

STARTUP_TIMEOUT = 30.0  # seconds for `recoup serve` to answer /healthz
RUNS_TIMEOUT = 30.0  # seconds for the three attempts to be logged


class FlakyReceiver:
    """Answers 500, 500, then 200; verifies every request's signature with `secret`."""

    def __init__(self, secret: str) -> None:
        self.webhook = Webhook(secret)
        self.statuses = [500, 500]
        self.verified: list[dict[str, str]] = []
        self.refused: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    receiver.webhook.verify(body, headers)
                    receiver.verified.append(headers)
                except Exception as exc:  # a bad signature is a test failure, reported below
                    receiver.refused.append(repr(exc))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def recoup(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recoup", *argv], capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def served(backend: Backend, store: Store) -> Iterator[str]:  # the store: migrated first
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()  # `recoup serve` binds it again at once
    process = subprocess.Popen(
        [sys.executable, "-m", "recoup", "serve", *backend.db_args(), "--port", str(port),
         "--allow-private-targets"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "RECOUP_ALLOW_PRIVATE_TARGETS": ""},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        with Client(url, "rcp_none", retries=0) as probe:
            while not probe.ready():
                if process.poll() is not None or time.monotonic() > deadline:
                    output = process.stdout.read() if process.stdout else ""
                    pytest.fail(f"recoup serve did not start:\n{output}")
                time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()


@pytest.mark.slow
def test_a_job_that_fails_twice_then_succeeds_logs_three_signed_attempts(
    backend: Backend, served: str
) -> None:
    made = recoup("tenants", "create", "e2e", *backend.db_args(), "--json")
    assert made.returncode == 0, made.stderr
    tenant = json.loads(made.stdout)
    receiver = FlakyReceiver(tenant["signing_secret"])
    try:
        with Client(served, tenant["token"]) as api:
            job = api.create_job(
                receiver.url,
                run_at=datetime.now(UTC) + timedelta(seconds=1),
                body={"invoice": "inv_42"},
                retry={"max_attempts": 5, "min_backoff_seconds": 0.2, "max_backoff_seconds": 0.5},
            )
            deadline = time.monotonic() + RUNS_TIMEOUT
            while api.get_job(job.id).state != "succeeded":
                assert time.monotonic() < deadline, api.runs(job.id)
                time.sleep(0.1)
            runs = api.runs(job.id)
            metrics = httpx.get(f"{served}/metrics").text
    finally:
        receiver.close()

    assert [r.attempt for r in runs] == [1, 2, 3]
    assert [r.status_code for r in runs] == [500, 500, 200]
    assert [r.outcome for r in runs] == ["retry", "retry", "succeeded"]
    assert runs[0].started_at >= job.run_at
    assert all(r.finished_at >= r.started_at and r.duration_ms >= 0 for r in runs)
    assert receiver.refused == []
    assert len(receiver.verified) == 3
    assert {h["webhook-id"] for h in receiver.verified} == {job.id}  # one id for every retry
    assert 'recoup_attempts_total{outcome="succeeded",tenant="e2e"} 1.0' in metrics
    assert 'recoup_attempts_total{outcome="retry",tenant="e2e"} 2.0' in metrics
    assert 'recoup_firing_lag_seconds_count{tenant="e2e"} 3.0' in metrics
