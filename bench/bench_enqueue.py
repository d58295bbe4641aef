"""Enqueue benchmark: one job at a time, through the Python API and through the HTTP API.

    .venv/bin/python bench/bench_enqueue.py [--quick] [--n 10000] [--seconds 5]
        [--dsn postgresql://postgres@127.0.0.1:5432/test]

1. Python API, the way an application enqueues (one call, one job, one after the other):
   Recoup's `Scheduler.enqueue` on PostgreSQL and on SQLite (a file, synchronous=FULL, the
   default), pgqueuer's `Queries.enqueue` and procrastinate's `defer_async`, each on a fresh
   database of its own on the same server: jobs/s, p50/p99 latency of one call. The peers are
   installed into `bench/.peers` on first use and run there (`peers_workloads.py`).
2. HTTP API: `POST /v1/jobs` with a unique `Idempotency-Key` per request, 1 and 16
   connections, against `recoup serve --no-worker --allow-private-targets` (the job's target
   is an IP literal: no DNS in the figure) on SQLite and on PostgreSQL (the same app,
   middleware and authentication a deployment runs; no worker, so the jobs, due in an hour,
   only cost their creation), beside a bare FastAPI endpoint validating the same body
   (`bare_api.py`: the ceiling), each with 1 and 2 processes (`--processes 2`; uvicorn's
   `workers=2` for the bare one). Driven by Debian's `wrk` (`apt-get install wrk`) in its own
   process; without it, by a small asyncio client in its own process (`http_load.py`), which
   may be the bottleneck near the ceiling: the table says which ran.

Prints one table with Recoup/peer and Recoup/ceiling ratios from the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_scheduler import ensure_peers_env, fresh_database  # noqa: E402

WRK_SCRIPT = """
local counter = 0
local threads = 0
setup = function(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
request = function()
  counter = counter + 1
  wrk.headers["Idempotency-Key"] = run .. "-" .. tid .. "-" .. counter
  return wrk.format(nil, nil, nil, nil)
end
done = function(summary, latency, requests)
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"errors":%d,"non2xx":%d,"p50_us":%d,"p99_us":%d}\\n',
    summary.requests, summary.duration,
    summary.errors.connect + summary.errors.read + summary.errors.write
      + summary.errors.timeout,
    summary.errors.status, latency:percentile(50), latency:percentile(99)))
end
"""
# An HTTP target on an IP literal (served with --allow-private-targets): no DNS per request.
TARGET = {"url": "http://127.0.0.1:9/hook", "body": {"invoice": "in_1"}}
BODY = json.dumps({"delay_seconds": 3600, "target": TARGET})


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


# Python API ---------------------------------------------------------------------------------


def recoup_enqueue_one(url: str, n: int) -> dict[str, float]:
    """n jobs one by one through `Scheduler.enqueue`, in a process of its own."""
    code = f"""
import json, time
from recoup.jobs.model import PythonTarget
from recoup.jobs.scheduler import Scheduler
from recoup.storage import open_store
store = open_store({url!r})
scheduler = Scheduler(store)
target = PythonTarget(handler="noop")
scheduler.enqueue(target)  # the default tenant is made on first use: not part of the figure
lat = []
start = time.perf_counter()
for _ in range({n}):
    began = time.perf_counter()
    scheduler.enqueue(target)
    lat.append(time.perf_counter() - began)
elapsed = time.perf_counter() - start
lat.sort()
print(json.dumps({{"jobs_per_s": {n} / elapsed, "p50_ms": lat[len(lat) // 2] * 1000,
                   "p99_ms": lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))] * 1000}}))
store.close()
"""
    return _json_of([sys.executable, "-c", code])


def peer_enqueue_one(python: Path, peer: str, dsn: str, n: int) -> dict[str, Any]:
    command = [str(python), str(HERE / "peers_workloads.py"), peer, "enqueue_one"]
    return _json_of([*command, "--dsn", dsn, "--n", str(n)])


def _json_of(command: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# HTTP API -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, process: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited ({process.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def issue_token(db: str) -> str:
    """A tenant `bench` and its token in `db` (migrated on the way)."""
    code = f"""
from recoup.storage import open_api_tables, open_store
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
store = open_store({db!r})
now = SystemClock().now()
store.ensure_tenant(new_tenant("bench", now=now))
print(issue_token(open_api_tables(store), "bench", now=now).secret)
store.close()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def start_server(command: list[str], port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, process)
    except BaseException:
        stop(process)
        raise
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def find_wrk() -> str | None:
    """Debian's `wrk`, installed on first use where apt-get can (as root, as the bench's peers
    are installed into their own environment): a load generator in Python is the bottleneck
    itself near a few thousand requests/s."""
    found = shutil.which("wrk")
    if found is not None or shutil.which("apt-get") is None or os.geteuid() != 0:
        return found
    print("installing wrk (apt-get) for the HTTP rows", file=sys.stderr)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], env=env, **quiet).returncode:
        subprocess.run(["apt-get", "update", "-qq"], env=env, **quiet)
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], env=env, **quiet)
    return shutil.which("wrk")


def load(port: int, token: str | None, connections: int, seconds: float) -> dict[str, Any]:
    """Requests/s and p50/p99 (ms) of POST /v1/jobs, each with a fresh Idempotency-Key."""
    url = f"http://127.0.0.1:{port}/v1/jobs"
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    wrk = find_wrk()
    if wrk is None:
        spec = json.dumps({"url": url, "headers": headers, "body": BODY})
        command = [sys.executable, str(HERE / "http_load.py"), spec, str(connections), str(seconds)]
        result = _json_of(command)
        result["generator"] = "asyncio"
        return result
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "post.lua"
        lines = [f'run = "{uuid.uuid4().hex[:12]}"', "wrk.method = 'POST'"]
        lines.append(f"wrk.body = {json.dumps(BODY)}")
        lines += [f'wrk.headers["{name}"] = "{value}"' for name, value in headers.items()]
        script.write_text("\n".join(lines) + WRK_SCRIPT)
        threads = min(connections, 2)
        duration = f"{max(1, round(seconds))}s"  # wrk takes whole seconds
        command = [wrk, "-t", str(threads), "-c", str(connections), "-d", duration]
        out = subprocess.run(
            [*command, "-s", str(script), url], capture_output=True, text=True, timeout=120
        )
    if out.returncode != 0 or not out.stdout.strip().startswith(("{", "Running")):
        return {"error": (out.stderr or out.stdout).strip()[-200:]}
    raw = json.loads(out.stdout.strip().splitlines()[-1])
    seconds_run = raw["duration_us"] / 1e6
    return {
        "requests_per_s": raw["requests"] / seconds_run,
        "p50_ms": raw["p50_us"] / 1000,
        "p99_ms": raw["p99_us"] / 1000,
        "failed": raw["errors"] + raw["non2xx"],
        "generator": "wrk",
    }


PROCESSES = (1, 2)  # `recoup serve --processes N`, and the bare endpoint's uvicorn workers


def server_label(label: str, processes: int) -> str:
    return label if processes == 1 else f"{label} {processes} processes"


def http_rows(dsn: str, seconds: float, connections: list[int]) -> dict[str, dict[str, Any]]:
    """Each server with 1 and 2 processes, side by side in this one run. Recoup logs at
    `warning` as the bare endpoint does: an access line per request is a cost of its own."""
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        apps: list[tuple[str, list[str], str | None]] = []
        for processes in PROCESSES:
            for label, db in (
                ("recoup http (sqlite)", f"sqlite:///{Path(tmp) / f'api-{processes}.db'}"),
                ("recoup http (postgresql)", fresh_database(dsn, f"bench_enqueue_api{processes}")),
            ):
                serve = ["-m", "recoup", "serve", "--no-worker", "--allow-private-targets"]
                serve += ["--log-level", "warning", "--processes", str(processes), "--db", db]
                apps.append((server_label(label, processes), serve, db))
            bare = [str(HERE / "bare_api.py")]
            apps.append((server_label("bare fastapi (ceiling)", processes), bare, None))
        for label, args, db in apps:
            token = issue_token(db) if db is not None else None
            port = free_port()
            processes = 2 if label.endswith(" 2 processes") else 1
            extra = ["--port", str(port)] if db is not None else [str(port), str(processes)]
            server = start_server([sys.executable, *args, *extra], port)
            try:
                load(port, token, 4, 1.0)  # warm up (connections, prepared statements)
                for count in connections:
                    results[f"{label} c={count}"] = load(port, token, count, seconds)
            finally:
                stop(server)
    return results


# The table ----------------------------------------------------------------------------------


def fmt(value: Any, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get(
            "RECOUP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--n", type=int, default=None, help="jobs per Python API run")
    parser.add_argument("--seconds", type=float, default=None, help="per HTTP load run")
    parser.add_argument("--quick", action="store_true", help="smaller runs, for a smoke test")
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument("--skip-python", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON")
    args = parser.parse_args()
    n = args.n or (2_000 if args.quick else 20_000)
    seconds = args.seconds or (2.0 if args.quick else 5.0)

    results: dict[str, dict[str, Any]] = {}
    if not args.skip_python:
        python = ensure_peers_env()
        with tempfile.TemporaryDirectory() as tmp:
            pg = fresh_database(args.dsn, "bench_enqueue_recoup")
            results["recoup (postgresql)"] = recoup_enqueue_one(pg, n)
            results["recoup (sqlite)"] = recoup_enqueue_one(f"sqlite:///{Path(tmp) / 'e.db'}", n)
        for peer in ("pgqueuer", "procrastinate"):
            dsn = fresh_database(args.dsn, f"bench_enqueue_{peer}")
            results[peer] = peer_enqueue_one(python, peer, dsn, n)
    if not args.skip_http:
        results.update(http_rows(args.dsn, seconds, [1, 16]))

    if args.json:
        print(json.dumps(results, indent=2))
        return
    print_table(results, n, seconds)


def print_table(results: dict[str, dict[str, Any]], n: int, seconds: float) -> None:
    python_rows = [k for k in results if " c=" not in k]
    http = [k for k in results if " c=" in k]
    if python_rows:
        print(f"\nSingle enqueue through the Python API ({n:,} jobs one by one)")
        print(f"{'system':<24}{'jobs/s':>10}{'p50 ms':>10}{'p99 ms':>10}")
        for name in python_rows:
            r = results[name]
            if "error" in r:
                print(f"{name:<24}  error: {r['error']}")
                continue
            rate, p50, p99 = r.get("jobs_per_s"), r.get("p50_ms"), r.get("p99_ms")
            print(f"{name:<24}{fmt(rate, ',.0f'):>10}{fmt(p50, '.2f'):>10}{fmt(p99, '.2f'):>10}")
        ours = results.get("recoup (postgresql)", {}).get("jobs_per_s")
        for peer in ("pgqueuer", "procrastinate"):
            theirs = results.get(peer, {}).get("jobs_per_s")
            if ours and theirs:
                print(f"  recoup (postgresql) / {peer}: {ours / theirs:.2f}×")
    if http:
        generator = {results[k].get("generator") for k in http} - {None}
        how = f"{seconds:g} s each, {'/'.join(sorted(generator))}"
        print(f"\nPOST /v1/jobs, unique Idempotency-Key ({how})")
        print(f"{'server':<46}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'failed':>8}")
        for name in http:
            r = results[name]
            if "error" in r:
                print(f"{name:<46}  error: {r['error']}")
                continue
            rate, p50, p99 = r.get("requests_per_s"), r.get("p50_ms"), r.get("p99_ms")
            print(
                f"{name:<46}{fmt(rate, ',.0f'):>10}{fmt(p50, '.2f'):>10}{fmt(p99, '.2f'):>10}"
                f"{fmt(r.get('failed'), 'd'):>8}"
            )
        for processes in PROCESSES:
            bare = server_label("bare fastapi (ceiling)", processes)
            for count in (1, 16):
                ceiling = results.get(f"{bare} c={count}", {}).get("requests_per_s")
                for backend in ("sqlite", "postgresql"):
                    name = server_label(f"recoup http ({backend})", processes)
                    ours = results.get(f"{name} c={count}", {}).get("requests_per_s")
                    if ours and ceiling:
                        print(f"  {name} / ceiling, c={count}: {ours / ceiling:.2f}×")


if __name__ == "__main__":
    main()
