"""Test support: the default tenant's signing secret, a job as a worker holds it once claimed,
and a real HTTP receiver on 127.0.0.1 with scripted replies that records every request
(headers, body, arrival time)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from recoup.jobs.model import BackoffPolicy, Job, JobState, PythonTarget

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the default tenant's signing secret
POLL = 0.02  # seconds between the receiver's checks for a shutdown
CLAIMED_AT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def claimed_job(
    attempts: int, retry: BackoffPolicy, *, job_id: str = "job_1", run_at: datetime = CLAIMED_AT
) -> Job:
    """A job as a worker holds it once claimed for its `attempts`-th attempt (leased by "w"),
    for the worker's parts tested without a store."""
    return Job(
        id=job_id,
        tenant="default",
        name=None,
        run_at=run_at,
        target=PythonTarget(handler="h"),
        payload=None,
        idempotency_key=None,
        retry=retry,
        timeout=timedelta(seconds=30),
        keep_for=None,
        schedule_id=None,
        state=JobState.RUNNING,
        attempts=attempts,
        lease_expires_at=run_at + timedelta(seconds=30),
        leased_by="w",
        last_error=None,
        created_at=run_at,
        updated_at=run_at,
        finished_at=None,
    )


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    delay: float = 0.0  # seconds to wait before answering
    gate: threading.Event | None = None  # when set, answer once it is set (at most 60 s)


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    at: float  # time.time() on arrival


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.script: deque[Reply] = deque()
        self.default = Reply()
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                with receiver.arrived:
                    receiver.requests.append(
                        Received(
                            self.command,
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            body,
                            time.time(),
                        )
                    )
                    reply = receiver.script.popleft() if receiver.script else receiver.default
                    receiver.arrived.notify_all()
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.gate is not None:
                    reply.gate.wait(60)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:
                    pass  # the client went away (a killed worker, a timeout)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        # `shutdown()` waits for the serving loop's next poll: keep it short (default 0.5 s).
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def reply(self, *replies: Reply) -> None:
        with self.lock:
            self.script.extend(replies)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.requests) >= count, timeout)
            return list(self.requests)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Database:
    """One test's database: `url` (+ `schema` on PostgreSQL) and `open()` for more stores."""

    backend: str
    url: str
    schema: str | None
    _factory: Callable[[], Any]
    opened: list[Any] = field(default_factory=list)

    def open(self) -> Any:
        store = self._factory()
        self.opened.append(store)
        return store

    def cli_args(self) -> list[str]:
        return ["--db", self.url, *(["--schema", self.schema] if self.schema else [])]
