"""`recoup listen`: answers every request, prints what it is, and checks its Standard Webhooks
signature against the tenant's secret when it has one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from recoup.cli.listen import make_handler, text_line
from tests.cli.test_cli import run

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _signed(body: str, *, secret: str = SECRET, at: datetime = NOW) -> dict[str, str]:
    signature = Webhook(secret).sign(msg_id="msg_1", timestamp=at, data=body)
    return {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
        "Recoup-Job-Name": "invoice-42-retry-1",
        "Recoup-Attempt": "2",
        "Content-Type": "application/json",
    }


@pytest.fixture
def listening(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    options: dict[str, Any] = {"secret": SECRET, "status": 200, **getattr(request, "param", {})}
    seen: list[dict[str, Any]] = []
    handler = make_handler(emit=seen.append, now=lambda: NOW, **options)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", seen
    server.shutdown()
    server.server_close()


def test_a_signed_delivery_is_answered_and_printed_with_its_attempt(
    listening: tuple[str, list[dict[str, Any]]],
) -> None:
    url, seen = listening
    body = '{"invoice": "inv_42"}'
    answer = httpx.post(f"{url}/hook", content=body, headers=_signed(body))
    assert answer.status_code == 200
    (one,) = seen
    assert one["signature"] == "ok" and one["body"] == body
    assert one["headers"]["recoup-attempt"] == "2"
    line = text_line(one)
    assert line.startswith("POST /hook recoup-job-name=invoice-42-retry-1 recoup-attempt=2")
    assert line.endswith('signature: ok {"invoice": "inv_42"}')


def test_a_wrong_signature_or_a_stale_timestamp_is_refused_with_401(
    listening: tuple[str, list[dict[str, Any]]],
) -> None:
    url, seen = listening
    body = "{}"
    other = "whsec_" + "QUJD" * 8
    assert httpx.post(url, content=body, headers=_signed(body, secret=other)).status_code == 401
    stale = _signed(body, at=NOW - timedelta(minutes=6))
    assert httpx.post(url, content=body, headers=stale).status_code == 401
    assert [s["signature"].split(" (")[0] for s in seen] == ["refused", "refused"]
    assert "no v1 signature matches" in seen[0]["signature"]


@pytest.mark.parametrize("listening", [{"secret": None, "status": 503}], indirect=True)
def test_without_a_secret_nothing_is_checked_and_the_chosen_status_is_answered(
    listening: tuple[str, list[dict[str, Any]]],
) -> None:
    url, seen = listening
    assert httpx.get(f"{url}/health?x=1").status_code == 503
    assert seen[0]["signature"] == "unchecked" and seen[0]["path"] == "/health?x=1"


def test_a_long_body_is_cut_on_its_text_line() -> None:
    seen = {"method": "POST", "path": "/", "headers": {}, "signature": "ok", "body": "x" * 600}
    assert text_line(seen).endswith("x" * 500 + "…")


def test_the_command_prints_json_lines_and_stops_on_sigterm() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "recoup", "listen", "--port", "0", "--json", "--status", "202"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None and process.stdout is not None
        banner = process.stderr.readline()
        assert banner.startswith("listening on http://127.0.0.1:")
        url = banner.split()[-1]
        assert httpx.post(url + "hook", content=b"hello").status_code == 202
        printed = json.loads(process.stdout.readline())
        assert printed["body"] == "hello" and printed["signature"] == "unchecked"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()  # closes both pipes


def test_a_malformed_secret_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "listen", "--secret", "whsec_!!not-base64")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "secret" in err and "!!not" not in err
