"""What the QStash-compatibility tests share: a `recoup serve` app on a virtual clock served by
uvicorn on a free loopback port, a tenant with a token, the official `qstash` SDK pointed at
`/qstash`, a worker that delivers what is due, and a destination that verifies every delivery
with the SDK's own `Receiver`."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from qstash import QStash, Receiver
from qstash.errors import SignatureError

from recoup.api.app import create_app
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.storage import Store, open_api_tables
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import VirtualClock
from tests.api.conftest import api_settings
from tests.support import ServerThread

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # the virtual clock's start


@dataclass
class Delivery:
    path: str
    method: str
    headers: dict[str, str]
    body: str
    verified: bool
    error: str | None


@dataclass
class Destination:
    """A QStash destination on 127.0.0.1: verifies `Upstash-Signature` with the SDK's
    `Receiver` (against the body and its own URL), answers 200 when it holds, 401 otherwise,
    and records every delivery."""

    receiver: Receiver | None = None
    deliveries: list[Delivery] = field(default_factory=list)

    def __post_init__(self) -> None:
        destination = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                signature = self.headers.get("Upstash-Signature")
                verified, error = destination.verify(self.path, signature, body)
                destination.deliveries.append(
                    Delivery(
                        self.path,
                        self.command,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                        verified,
                        error,
                    )
                )
                self.send_response(200 if verified else 401)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def verify(self, path: str, signature: str | None, body: str) -> tuple[bool, str | None]:
        if self.receiver is None or signature is None:
            return False, "no receiver or no signature"
        url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        try:
            self.receiver.verify(signature=signature, body=body, url=url)
        except SignatureError as exc:
            return False, str(exc)
        return True, None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Served:
    url: str
    store: Store
    clock: VirtualClock
    tenant: str
    token: str
    client: QStash
    scheduler: Scheduler

    def deliver(self) -> int:
        """Run every job due at the virtual clock's now; the number of attempts run."""
        return self.scheduler.worker(rng=random.Random(0)).drain()


@pytest.fixture
def served(store: Store) -> Iterator[Served]:
    clock = VirtualClock(START)
    ssrf = SsrfGuard(allow_private=True)
    scheduler = Scheduler(store, clock=clock, ssrf=ssrf)
    app = create_app(store, clock=clock, settings=api_settings(), scheduler=scheduler)
    tenant = "acme"
    store.ensure_tenant(new_tenant(tenant, now=START))
    token = issue_token(open_api_tables(store), tenant, now=START).secret
    with ServerThread(app) as server:
        client = QStash(token, base_url=f"{server.url}/qstash", retry=False)
        try:
            yield Served(server.url, store, clock, tenant, token, client, scheduler)
        finally:
            client.http._client.close()  # the SDK offers no close of its own


@pytest.fixture
def destination() -> Iterator[Destination]:
    found = Destination()
    yield found
    found.close()


__all__ = ["START", "Delivery", "Destination", "Served", "destination", "served"]
