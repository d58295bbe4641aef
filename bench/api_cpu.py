"""The server's CPU per request of the API's hot POSTs: `POST /v1/jobs`, `POST
/v1/dunning/failures`, an attempt's outcome and QStash's publish, against `recoup serve
--no-worker` on SQLite or PostgreSQL, beside the bare FastAPI endpoint (`bare_api.py`).

    python bench/api_cpu.py [--backend sqlite|postgresql|bare] [--path jobs|failures|outcome|
        publish] [--n 2000] [--profile FILE] [--dsn postgresql://…]

Requests are sent one after the other on one keep-alive connection by this process (each with
a fresh `Idempotency-Key`); the figure is the server process's user + system CPU time (every
thread's, from /proc) over the measured requests, divided by their number, after a warm-up: a
figure other processes' load changes far less than throughput. `--profile` runs the server
under cProfile (its main thread: the event loop) and writes the stats to FILE on exit.
`--in-process` calls the ASGI app itself, without uvicorn, one `POST /v1/jobs` after the
other, and reports this process's `time.process_time` per request: the app's own CPU, its
thread pool's included, with the HTTP server's parsing left out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_enqueue import BODY, free_port, issue_token, load, start_server, stop  # noqa: E402
from bench_scheduler import fresh_database  # noqa: E402

WARM_UP = 200  # requests before the measured ones (connections, caches, prepared statements)
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid`, all its threads (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def failure(invoice: str) -> bytes:
    return json.dumps(
        {
            "invoice_id": invoice,
            "customer_id": "cus_1",
            "amount": 1999,
            "currency": "usd",
            "failed_at": "2026-03-02T10:00:00Z",
            "timezone": "Europe/Berlin",
            "country": "DE",
            "decline_code": "insufficient_funds",
            "charge_url": "http://127.0.0.1:9/charge",
        }
    ).encode()


def requests_of(path: str, client: httpx.Client, n: int, run: str) -> list[tuple[str, bytes]]:
    """The (url path, body) of `n` requests of `path`, made ready (invoices for outcomes)."""
    if path == "jobs":
        return [("/v1/jobs", BODY.encode())] * n
    if path == "failures":
        return [("/v1/dunning/failures", failure(f"in_{run}_{i}")) for i in range(n)]
    if path == "publish":
        return [("/qstash/v2/publish/http://127.0.0.1:9/hook", b'{"invoice":"in_1"}')] * n
    assert path == "outcome"
    made = []
    for i in range(n):
        answer = client.post("/v1/dunning/failures", content=failure(f"in_{run}_o{i}"))
        answer.raise_for_status()
        invoice = answer.json()
        attempt = invoice["attempts"][0]["attempt"]
        url = f"/v1/dunning/invoices/{invoice['invoice_id']}/attempts/{attempt}/outcome"
        made.append((url, b'{"outcome":"failed","decline_code":"insufficient_funds"}'))
    return made


def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        if args.backend == "bare":
            db, token = None, None
            command = [sys.executable, str(HERE / "bare_api.py"), str(port)]
        else:
            if args.backend == "sqlite":
                db = f"sqlite:///{Path(tmp) / 'api.db'}"
            else:
                db = fresh_database(args.dsn, "bench_api_cpu")
            token = issue_token(db)
            command = [sys.executable, "-m", "recoup", "serve", "--no-worker"]
            command += ["--allow-private-targets", "--log-level", "warning"]
            command += ["--db", db, "--port", str(port)]
        if args.profile:
            command[1:1] = ["-m", "cProfile", "-o", str(Path(args.profile).resolve())]
        server = start_server(command, port)
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        run = uuid.uuid4().hex[:8]
        statuses: dict[int, int] = {}
        latencies: list[float] = []
        try:
            if args.connections:  # `POST /v1/jobs` by `bench_enqueue`'s load generator
                load(port, token, 4, 1.0)
                began_cpu = cpu_seconds(server.pid)
                result = load(port, token, args.connections, args.seconds)
                count = result["requests_per_s"] * args.seconds
                cpu = cpu_seconds(server.pid) - began_cpu
                return {
                    "backend": args.backend,
                    "c": args.connections,
                    **result,
                    "cpu_ms_per_request": cpu / count * 1000,
                }
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
                todo = requests_of(args.path, client, WARM_UP + args.n, run)
                for number, (url, body) in enumerate(todo):
                    if number == WARM_UP:
                        began_cpu, began = cpu_seconds(server.pid), time.perf_counter()
                    sent = time.perf_counter()
                    key = {"Idempotency-Key": f"{run}-{number}"}
                    answer = client.post(url, content=body, headers=key)
                    if number >= WARM_UP:
                        latencies.append(time.perf_counter() - sent)
                        statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
                cpu = cpu_seconds(server.pid) - began_cpu
                elapsed = time.perf_counter() - began
        finally:
            stop(server)
    latencies.sort()
    return {
        "backend": args.backend,
        "path": args.path,
        "n": args.n,
        "cpu_ms_per_request": cpu / args.n * 1000,
        "requests_per_s": args.n / elapsed,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[round(0.99 * (len(latencies) - 1))] * 1000,
        "statuses": statuses,
    }


def in_process(args: argparse.Namespace) -> dict[str, Any]:
    """`POST /v1/jobs` through the app as `recoup serve` builds it, called directly."""
    import asyncio

    from recoup.api.app import ApiSettings, create_app
    from recoup.jobs.ssrf import SsrfGuard
    from recoup.storage import open_api_tables, open_store
    from recoup.tenancy import issue_token as issued
    from recoup.tenancy import new_tenant
    from recoup.timekeeping.clock import SystemClock

    with tempfile.TemporaryDirectory() as tmp:
        if args.backend == "sqlite":
            db = f"sqlite:///{Path(tmp) / 'api.db'}"
        else:
            db = fresh_database(args.dsn, "bench_api_cpu")
        store = open_store(db)
        try:
            now = SystemClock().now()
            store.ensure_tenant(new_tenant("bench", now=now))
            tables = open_api_tables(store)
            token = issued(tables, "bench", now=now).secret
            settings = ApiSettings(ssrf=SsrfGuard(allow_private=True), prune_every=None)
            app = create_app(store, clock=SystemClock(), settings=settings, tables=tables)
            return asyncio.run(_drive(app, token, args.n, args.backend))
        finally:
            store.close()


async def _drive(app: Any, token: str, n: int, backend: str) -> dict[str, Any]:
    body = BODY.encode()
    run = uuid.uuid4().hex[:8]

    async def one(number: int) -> None:
        headers = [
            (b"host", b"bench"),
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"idempotency-key", f"{run}-{number}".encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/jobs",
            "raw_path": b"/v1/jobs",
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
            "state": {},
        }
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(scope, receive, send)
        assert sent[0]["status"] == 201, sent

    async with app.router.lifespan_context(app):
        for number in range(WARM_UP):
            await one(number)
        began_cpu, began = time.process_time(), time.perf_counter()
        for number in range(WARM_UP, WARM_UP + n):
            await one(number)
        cpu, elapsed = time.process_time() - began_cpu, time.perf_counter() - began
    return {
        "backend": backend,
        "in_process": True,
        "n": n,
        "cpu_ms_per_request": cpu / n * 1000,
        "wall_ms_per_request": elapsed / n * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "bare"), default="sqlite")
    parser.add_argument(
        "--path", choices=("jobs", "failures", "outcome", "publish"), default="jobs"
    )
    parser.add_argument("--n", type=int, default=2_000)
    parser.add_argument(
        "--connections", type=int, default=0, help="POST /v1/jobs at this concurrency instead"
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="with --connections")
    parser.add_argument(
        "--in-process", action="store_true", help="POST /v1/jobs through the ASGI app itself"
    )
    parser.add_argument("--profile", default=None, help="cProfile stats of the server to FILE")
    parser.add_argument(
        "--dsn",
        default=os.environ.get(
            "RECOUP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    args = parser.parse_args()
    print(json.dumps(in_process(args) if args.in_process else measure(args)))


if __name__ == "__main__":
    main()
