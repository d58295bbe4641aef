"""`recoup listen`: a receiver on loopback that prints every delivery, to try Recoup's targets
and callbacks without writing an endpoint (as `stripe listen` does for Stripe's events).

Contract:

    recoup listen [--host 127.0.0.1] [--port 9000] [--secret whsec_…] [--status 200] [--json]

Each request is answered `--status` (a 2xx, or a 4xx/5xx to watch Recoup retry) and printed on
one line: method, path, the Recoup headers that say which attempt it is, whether its Standard
Webhooks signature matches `--secret` (`RECOUP_LISTEN_SECRET`; without it nothing is checked)
and the body. A request whose signature does not match is answered 401 and printed with the
reason. `--json` prints one JSON object per request instead. SIGTERM or SIGINT stops it.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Any

import typer

from recoup.cli._app import app
from recoup.errors import InvalidInput

DEFAULT_PORT = 9000
# The headers that say what a delivery is, in the order they are printed.
SHOWN_HEADERS = (
    "recoup-job-id",
    "recoup-job-name",
    "recoup-attempt",
    "recoup-schedule-id",
    "idempotency-key",
    "webhook-id",
)
BODY_SHOWN = 500  # characters of a body printed on a text line


def describe(
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    signature: str,
) -> dict[str, Any]:
    """What one request says, as printed: `signature` is "ok", "unchecked" or the reason it
    was refused."""
    lowered = {name.lower(): value for name, value in headers.items()}
    return {
        "method": method,
        "path": path,
        "headers": {name: lowered[name] for name in SHOWN_HEADERS if name in lowered},
        "signature": signature,
        "body": body.decode("utf-8", errors="replace"),
    }


def text_line(seen: Mapping[str, Any]) -> str:
    """One request on one line, its body cut at `BODY_SHOWN` characters."""
    shown = " ".join(f"{name}={value}" for name, value in seen["headers"].items())
    body = seen["body"] if len(seen["body"]) <= BODY_SHOWN else seen["body"][:BODY_SHOWN] + "…"
    return f"{seen['method']} {seen['path']} {shown} signature: {seen['signature']} {body}"


def check_signature(
    headers: Mapping[str, str], body: bytes, secret: str | None, now: datetime
) -> str:
    """ "ok", "unchecked" without a secret, or why the signature is refused."""
    from recoup.receiver.errors import SignatureError, TimestampOutOfTolerance
    from recoup.receiver.signatures import verify_signature

    if secret is None:
        return "unchecked"
    try:
        verify_signature(headers, body, secret=secret, now=now)
    except (SignatureError, TimestampOutOfTolerance) as exc:
        return f"refused ({exc})"
    return "ok"


def make_handler(
    *,
    secret: str | None,
    status: int,
    emit: Callable[[dict[str, Any]], None],
    now: Callable[[], datetime],
) -> type[BaseHTTPRequestHandler]:
    """A request handler that answers `status` (401 on a bad signature) and emits each
    request described."""

    class Listener(BaseHTTPRequestHandler):
        server_version = "recoup-listen"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length > 0 else b""
            headers = {name: value for name, value in self.headers.items()}
            signature = check_signature(headers, body, secret, now())
            emit(describe(self.command, self.path, headers, body, signature=signature))
            code = 401 if signature.startswith("refused") else status
            answer = b"ok" if code < 400 else f"answered {code}".encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass  # each request is printed once, by `emit`

    return Listener


@app.command("listen")
def listen_command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = DEFAULT_PORT,
    secret: Annotated[
        str | None,
        typer.Option(
            envvar="RECOUP_LISTEN_SECRET",
            help="The tenant's whsec_… signing secret: check every request's signature.",
        ),
    ] = None,
    status: Annotated[
        int, typer.Option(min=200, max=599, help="Status to answer (5xx: watch retries).")
    ] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object a line.")] = False,
) -> None:
    """Print every request received (and answer it), to try targets and callbacks."""
    from recoup.receiver.signatures import check_secrets

    if secret is not None:
        check_secrets(secret)
    if not host or host != host.strip():
        raise InvalidInput("--host", host, "expected an address such as 127.0.0.1")
    lock = threading.Lock()

    def emit(seen: dict[str, Any]) -> None:
        with lock:
            print(json.dumps(seen) if as_json else text_line(seen), flush=True)

    handler = make_handler(secret=secret, status=status, emit=emit, now=lambda: datetime.now(UTC))
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as exc:
        raise InvalidInput("--port", port, f"expected a free port ({exc.strerror})") from None
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"listening on http://{host}:{server.server_port}/", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


__all__ = ["check_signature", "describe", "make_handler", "text_line"]
