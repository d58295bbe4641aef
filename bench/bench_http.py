"""HTTP dispatch benchmark: Recoup's worker delivering signed HTTP jobs, beside the raw rate of
httpx's and aiohttp's async clients against the same receiver, in the same run.

    .venv/bin/python bench/bench_http.py [--n 20000] [--dsn postgresql://postgres@127.0.0.1:5432/test]

- receiver: a minimal HTTP/1.1 server (an asyncio protocol) in a process of its own on
  127.0.0.1, answering every request 200 with a two-byte body: not the bottleneck;
- raw clients: N POSTs of a small JSON body by C coroutines sharing one pooled client, for
  httpx (fewer requests: it is slow, see encode/httpx#3215) and aiohttp, C = 10 and 100;
- Recoup: N HTTP jobs due now, signed (the default tenant's Standard Webhooks secret), bulk
  inserted into a fresh database (SQLite file; a fresh PostgreSQL schema, dropped after), then
  one `Worker` (concurrency 100, the SSRF guard allowing loopback) running until all N have
  succeeded; jobs/s from its start to the last completion written.

The table ends with Recoup ÷ the fastest raw client of the run (the target: ≥ 0.5), and gives
each row's CPU time per request or job in this process (`time.process_time`: every thread, the
store's included; the receiver's process not), which a busy machine disturbs less than a rate:
a raw client's over its timed requests, the worker's from its start to its stop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
import httpx
import psycopg

from recoup.jobs.model import HttpTarget, NewJob
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.worker import Worker, WorkerConfig
from recoup.jobs.worker.collector import settle_collector
from recoup.storage.postgres.store import PostgresStore
from recoup.storage.sqlite.store import SqliteStore

BODY = b'{"event":"bench"}'
INSERT_BATCH = 5_000  # jobs per insert_many call
HTTPX_REQUESTS = 2_000  # httpx runs at a few hundred requests/s: enough for a stable rate
WARMUP = 200  # requests sent before each raw client's timing starts
CONCURRENCY = (10, 100)
WORKER_CONCURRENCY = 100
DEADLINE = 300.0  # seconds any one drain may take


class Measured(NamedTuple):
    rate: float  # requests or jobs per second
    cpu_us: float  # CPU time of this process per request or job, in microseconds


def cpu_us(since: float, n: int) -> float:
    """CPU µs per request of this process since `since` (a `time.process_time()`)."""
    return (time.process_time() - since) / n * 1e6


# -- the receiver -----------------------------------------------------------------------------


REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


class Answer(asyncio.Protocol):
    """HTTP/1.1 keep-alive, every request answered 200 "ok" once its body is in: the least
    work a receiver can do, so that the clients, not the receiver, are measured."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data
        replies = 0
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buffer[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 : head.find(b"\r\n", at)]) if at >= 0 else 0
            if len(buffer) < end + 4 + length:
                break
            buffer = buffer[end + 4 + length :]
            replies += 1
        self.buffer = buffer
        if replies:
            self.transport.write(REPLY * replies)


def serve(port: int) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Answer, "127.0.0.1", port, backlog=1024)
        await server.serve_forever()

    asyncio.run(main())


@contextlib.contextmanager
def receiver() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the receiver did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        process.terminate()
        process.wait(10)


# -- raw clients ------------------------------------------------------------------------------


async def timed(one: Callable[[], Awaitable[None]], n: int, concurrency: int) -> Measured:
    """Requests/s and CPU µs per request of `n` calls of `one` by `concurrency` coroutines
    (after a warm-up)."""
    for _ in range(WARMUP // concurrency + 1):
        await asyncio.gather(*(one() for _ in range(concurrency)))
    left = n

    async def loop() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one()

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return Measured(n / (time.perf_counter() - start), cpu_us(cpu, n))


async def raw_httpx(url: str, n: int, concurrency: int) -> Measured:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:

        async def one() -> None:
            response = await client.post(url, content=BODY)
            assert response.status_code == 200

        return await timed(one, n, concurrency)


async def raw_aiohttp(url: str, n: int, concurrency: int) -> Measured:
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:

        async def one() -> None:
            async with session.post(url, data=BODY) as response:
                await response.read()
                assert response.status == 200

        return await timed(one, n, concurrency)


# -- Recoup -----------------------------------------------------------------------------------


def insert_jobs(store: Any, url: str, n: int) -> None:
    scheduler = Scheduler(store, ssrf=SsrfGuard(allow_private=True))
    assert scheduler.default_tenant().signing_secret  # so every request is signed
    target = HttpTarget(url=url, body={"event": "bench"})
    now = datetime.now(UTC)
    for offset in range(0, n, INSERT_BATCH):
        count = min(INSERT_BATCH, n - offset)
        store.insert_many([NewJob(run_at=now, target=target) for _ in range(count)], now=now)


async def drain(store: Any, n: int) -> Measured:
    """Jobs/s and CPU µs per job of one worker delivering the `n` due HTTP jobs in `store`."""
    done = asyncio.Event()
    failed: list[str] = []
    count = 0

    def observe(job: Any, run: Any) -> None:
        nonlocal count
        count += 1
        if run.outcome != "succeeded":
            failed.append(f"{run.outcome}: {run.error}")
        if count >= n:
            done.set()

    worker = Worker(
        store,
        WorkerConfig(concurrency=WORKER_CONCURRENCY, schedules=False),
        ssrf=SsrfGuard(allow_private=True),
        on_attempt=observe,
    )
    start, cpu = time.perf_counter(), time.process_time()
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(done.wait(), DEADLINE)
    finally:
        elapsed = time.perf_counter() - start
        worker.request_stop()
        await task
    if failed:
        raise RuntimeError(f"{len(failed)} attempts did not succeed, e.g. {failed[0]}")
    return Measured(n / elapsed, cpu_us(cpu, n))


def recoup_sqlite(url: str, n: int) -> Measured:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db")
        try:
            insert_jobs(store, url, n)
            return asyncio.run(drain(store, n))
        finally:
            store.close()


def recoup_postgres(url: str, n: int, dsn: str) -> Measured:
    schema = f"bench_http_{os.getpid()}"
    store = PostgresStore(dsn, schema=schema, max_size=8)
    try:
        insert_jobs(store, url, n)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"ANALYZE {schema}.jobs")
        return asyncio.run(drain(store, n))
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# -- the table --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="requests and jobs per row")
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the receiver process
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    # As `recoup worker` sets it (raw clients included: every row runs under the same settings).
    settle_collector()

    rows: list[tuple[str, Measured | str]] = []

    def row(name: str, measure: Callable[[], Measured]) -> None:
        try:
            result: Measured | str = measure()
        except Exception as exc:  # one failed row must not hide the others
            result = f"error: {type(exc).__name__}: {exc}"
        rows.append((name, result))
        shown = (
            f"{result.rate:,.0f}/s, {result.cpu_us:,.0f} µs CPU each"
            if isinstance(result, Measured)
            else result
        )
        print(f"  {name}: {shown}", file=sys.stderr)

    with receiver() as url:
        few = min(args.n, HTTPX_REQUESTS)
        for c in CONCURRENCY:
            row(f"raw httpx, concurrency {c}", lambda c=c: asyncio.run(raw_httpx(url, few, c)))
        for c in CONCURRENCY:
            row(
                f"raw aiohttp, concurrency {c}",
                lambda c=c: asyncio.run(raw_aiohttp(url, args.n, c)),
            )
        raw = [result for _, result in rows if isinstance(result, Measured)]
        row("Recoup worker, SQLite", lambda: recoup_sqlite(url, args.n))
        row("Recoup worker, PostgreSQL", lambda: recoup_postgres(url, args.n, args.dsn))

    ceiling = max((result.rate for result in raw), default=0.0)
    # The CPU a request costs the leanest raw client: what a delivery's CPU is compared with.
    leanest = min((result.cpu_us for result in raw), default=0.0)
    measured = {name: result for name, result in rows if isinstance(result, Measured)}
    if args.json:
        figures = {name: result.rate for name, result in measured.items()}
        sqlite, postgres = (
            measured.get("Recoup worker, SQLite"),
            measured.get("Recoup worker, PostgreSQL"),
        )
        print(
            json.dumps(
                {
                    "raw_fastest": ceiling,
                    "recoup_sqlite": figures.get("Recoup worker, SQLite"),
                    "recoup_postgresql": figures.get("Recoup worker, PostgreSQL"),
                    "raw_leanest_cpu_us": leanest,
                    "recoup_sqlite_cpu_us": None if sqlite is None else sqlite.cpu_us,
                    "recoup_postgresql_cpu_us": None if postgres is None else postgres.cpu_us,
                    **figures,
                }
            )
        )
        return
    width = max(len(name) for name, _ in rows)
    print(
        f"\n{'client':<{width}}  {'requests/s':>11}  {'÷ fastest raw':>13}"
        f"  {'CPU µs each':>11}  {'leanest raw ÷':>13}"
    )
    for name, result in rows:
        if isinstance(result, Measured):
            ours = name.startswith("Recoup")
            ratio = f"{result.rate / ceiling:.2f}" if ceiling and ours else ""
            lean = f"{leanest / result.cpu_us:.2f}" if leanest and ours else ""
            print(
                f"{name:<{width}}  {result.rate:>11,.0f}  {ratio:>13}"
                f"  {result.cpu_us:>11,.0f}  {lean:>13}"
            )
        else:
            print(f"{name:<{width}}  {result}")
    print(f"\n{args.n:,} requests or jobs per row (httpx: {few:,}); the target: ≥ 0.50")


if __name__ == "__main__":
    main()
