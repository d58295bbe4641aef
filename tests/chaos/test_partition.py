"""A network partition without a reset, on PostgreSQL: one worker reaches the database through
an in-process TCP proxy that, for longer than the job's lease, stops forwarding (its sockets
stay open, nothing is sent, no RST: the worker's calls hang and the server keeps its session,
advisory lock included). The cut-off worker must give its job up before anyone else may take
it (its watchdog, on elapsed time: no beat for the session's grace), the other worker takes it
once its lease expires, the job never runs twice at once, and everything completes after the
partition heals."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import BackoffPolicy, JobState, PythonTarget, RunOutcome, Tenant
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from tests.support import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

LEASE = timedelta(seconds=4)
PARTITION_SECONDS = 7.0  # longer than the lease
FAST = {"session_beat": timedelta(seconds=0.1), "dead_check_interval": timedelta(seconds=0.05)}


class BlackholeProxy:
    """127.0.0.1:port → the database; `cut()` stops forwarding both ways (bytes stay unread,
    sockets stay open), `heal()` forwards again."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.closed = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while not self.closed.is_set():
            self.flowing.wait()
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.flowing.wait()  # a partition in the middle of a message holds its rest
            try:
                sink.sendall(data)
            except OSError:
                return

    def cut(self) -> None:
        self.flowing.clear()

    def heal(self) -> None:
        self.flowing.set()

    def close(self) -> None:
        self.closed.set()
        self.flowing.set()
        self.listener.close()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


@pytest.fixture
def stores(postgres_url: str) -> Iterator[tuple[Any, Any, BlackholeProxy]]:
    import psycopg

    from recoup.storage.postgres.store import PostgresStore

    parts = urlsplit(postgres_url)
    proxy = BlackholeProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    netloc = parts.netloc.rsplit("@", 1)
    via = f"{netloc[0]}@127.0.0.1:{proxy.port}" if len(netloc) == 2 else f"127.0.0.1:{proxy.port}"
    proxied_url = urlunsplit(parts._replace(netloc=via))
    schema = f"test_{uuid.uuid4().hex[:12]}"
    direct = PostgresStore(postgres_url, schema=schema)
    direct.ensure_tenant(
        Tenant(id="default", name="Default", signing_secret="s" * 32, created_at=datetime.now(UTC))
    )
    proxied = PostgresStore(proxied_url, schema=schema)
    try:
        yield direct, proxied, proxy
    finally:
        proxy.heal()
        proxied.close()
        direct.close()
        proxy.close()
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_worker_partitioned_longer_than_its_lease_gives_up_before_another_takes_over(
    stores: tuple[Any, Any, BlackholeProxy],
) -> None:
    direct, proxied, proxy = stores
    events: list[tuple[float, str]] = []
    registry = HandlerRegistry()

    @registry.register("work")
    async def work(ctx: HandlerContext) -> None:
        events.append((time.monotonic(), f"start {ctx.attempt}"))
        try:
            await asyncio.sleep(60 if ctx.payload == "long" and ctx.attempt == 1 else 0.2)
        except asyncio.CancelledError:
            events.append((time.monotonic(), f"interrupted {ctx.attempt}"))
            raise
        events.append((time.monotonic(), f"end {ctx.attempt}"))

    guard = SsrfGuard(allow_private=True)
    cut_off = Scheduler(proxied, ssrf=guard)
    other = Scheduler(direct, ssrf=guard)
    retry = BackoffPolicy(max_attempts=3, min_backoff=timedelta(seconds=0.1))
    with cut_off.running_worker(handlers=registry, worker_id="cut-off", lease=LEASE, **FAST):
        job = other.enqueue(PythonTarget(handler="work"), retry=retry, payload="long")
        assert wait_until(lambda: [e for _, e in events] == ["start 1"], timeout=20)
        with other.running_worker(handlers=registry, worker_id="other", lease=LEASE, **FAST):
            cut_at = time.monotonic()
            proxy.cut()
            assert wait_until(lambda: any(e == "start 2" for _, e in events), timeout=30)
            time.sleep(max(0.0, PARTITION_SECONDS - (time.monotonic() - cut_at)))
            proxy.heal()
            healed_at = time.monotonic()
            assert wait_until(lambda: other.get(job.id).state is JobState.SUCCEEDED, timeout=30)
            done_at = time.monotonic()
        # Healed, the cut-off worker alone runs new work again.
        after = other.enqueue(PythonTarget(handler="work"), retry=retry)
        assert wait_until(lambda: other.get(after.id).state is JobState.SUCCEEDED, timeout=30)
        resumed_at = time.monotonic()
    names = [e for _, e in events][:2]
    at = {e: t for t, e in events}
    assert names == ["start 1", "interrupted 1"], events
    assert at["interrupted 1"] < at["start 2"]  # never twice at once
    assert at["interrupted 1"] - cut_at < LEASE.total_seconds()  # gave up before the lease
    runs = [(r.attempt, r.outcome) for r in other.runs(job.id)]
    assert runs[-1] == (2, RunOutcome.SUCCEEDED) and runs[0][1] is RunOutcome.LOST, runs
    print(
        f"partition figures: gave up {at['interrupted 1'] - cut_at:.2f} s after the cut, "
        f"taken over {at['start 2'] - cut_at:.2f} s after it, done "
        f"{done_at - healed_at:.2f} s after the heal; new work on the healed worker in "
        f"{resumed_at - done_at:.2f} s"
    )
