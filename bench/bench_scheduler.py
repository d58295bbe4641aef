"""Scheduler benchmark: Recoup against procrastinate and pgqueuer, same workloads, same run.

    .venv/bin/python bench/bench_scheduler.py [--quick] [--dsn postgresql://postgres@127.0.0.1:5432/test]

Workloads, each on a fresh database of its own on the same PostgreSQL server:

- enqueue: bulk-insert N due jobs (jobs/s);
- drain: one worker process runs N due no-op jobs (jobs/s), an async handler as the peers';
  Recoup's sync `inline=True` fast path is measured too, on a row of its own (no peer has one);
- burst: 2,000 jobs due at one instant, a worker already running; firing lag p50/p99 (ms);
- claim cost: Recoup's claim of a due batch with and without millions of far-future jobs.

The peers are installed from PyPI into their own environment (`bench/.peers`) on first use
and run as subprocesses, so nothing of theirs enters Recoup's environment. The table ends with
Recoup/peer ratios (higher is better for rates; for lag, peer/Recoup).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

HERE = Path(__file__).resolve().parent
PEERS_ENV = HERE / ".peers"
PEER_PACKAGES = ["procrastinate", "pgqueuer", "asyncpg", "psycopg[binary]"]
PEERS = ("procrastinate", "pgqueuer")


def ensure_peers_env() -> Path:
    python = PEERS_ENV / "bin" / "python"
    if not python.exists():
        print("installing procrastinate and pgqueuer into bench/.peers …", file=sys.stderr)
        venv.create(PEERS_ENV, with_pip=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES],
            check=True,
        )
    return python


def database_url(base: str, name: str) -> str:
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=f"/{name}"))


def fresh_database(base: str, name: str) -> str:
    """Drop and create database `name` on the server of `base`; return its URL."""
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(base, name)


def run_peer(
    python: Path, peer: str, workload: str, dsn: str, n: int, concurrency: int
) -> dict[str, Any]:
    out = subprocess.run(
        [
            str(python),
            str(HERE / "peers_workloads.py"),
            peer,
            workload,
            "--dsn",
            dsn,
            "--n",
            str(n),
            "--concurrency",
            str(concurrency),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_recoup(workload: str, dsn: str, n: int, concurrency: int) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / "recoup_workloads.py"),
            workload,
            "--dsn",
            dsn,
            "--n",
            str(n),
            "--concurrency",
            str(concurrency),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


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
    parser.add_argument("--quick", action="store_true", help="smaller N, for a smoke run")
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON")
    args = parser.parse_args()

    python = ensure_peers_env()
    n_enqueue = 20_000 if args.quick else 200_000
    n_drain = 10_000 if args.quick else 100_000
    n_drain_procrastinate = 2_000 if args.quick else 5_000  # ≈0.5k/s: keep its run short
    n_burst = 2_000
    far_future = 100_000 if args.quick else 2_000_000

    results: dict[str, dict[str, Any]] = {}

    def run_ours(workload: str, n: int, dsn: str) -> dict[str, Any]:
        return run_recoup(workload, dsn, n, 50)

    def run_theirs(peer: str, workload: str, n: int, conc: int, dsn: str) -> dict[str, Any]:
        return run_peer(python, peer, workload, dsn, n, conc)

    def measure(key: str, fn: Callable[[str], dict[str, Any]], db: str) -> None:
        dsn = fresh_database(args.dsn, db)
        results[key] = fn(dsn)
        print(f"{key}: {results[key]}", file=sys.stderr)

    for workload, n in (("enqueue", n_enqueue), ("drain", n_drain), ("burst", n_burst)):
        measure(f"recoup/{workload}", functools.partial(run_ours, workload, n), "bench_recoup")
        for peer in PEERS:
            k = n_drain_procrastinate if (peer, workload) == ("procrastinate", "drain") else n
            conc = 10 if peer == "procrastinate" else 50
            measure(
                f"{peer}/{workload}",
                functools.partial(run_theirs, peer, workload, k, conc),
                f"bench_{peer}",
            )
    measure(
        "recoup/drain_inline",
        lambda d: run_recoup("drain_inline", d, n_drain, 50),
        "bench_recoup",
    )
    measure(
        "recoup/claim_cost",
        lambda d: run_recoup("claim_cost", d, far_future, 50),
        "bench_recoup",
    )

    if args.json:
        print(json.dumps(results, indent=2))
    print_table(results)
    for db in ("bench_recoup", *(f"bench_{p}" for p in PEERS)):
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def print_table(results: dict[str, dict[str, Any]]) -> None:
    def get(key: str, field: str) -> float | None:
        value = results.get(key, {}).get(field)
        return float(value) if isinstance(value, (int, float)) else None

    rows = [
        ("bulk enqueue (jobs/s)", "enqueue", "jobs_per_s", True),
        ("drain, one worker (jobs/s)", "drain", "jobs_per_s", True),
        ("  Recoup inline handler (jobs/s)", "drain_inline", "jobs_per_s", True),
        ("burst of 2,000: lag p50 (ms)", "burst", "lag_p50_ms", False),
        ("burst of 2,000: lag p99 (ms)", "burst", "lag_p99_ms", False),
    ]
    header = f"{'workload':32} {'recoup':>10} {'procrastinate':>14} {'pgqueuer':>10}"
    header += f" {'vs procr.':>10} {'vs pgq.':>9}"
    print(header)
    print("-" * len(header))
    for label, workload, field, higher_is_better in rows:
        ours = get(f"recoup/{workload}", field)
        peers = [get(f"{p}/{workload}", field) for p in PEERS]
        ratios: list[float | None] = []
        for theirs in peers:
            if ours is None or theirs is None or ours == 0 or theirs == 0:
                ratios.append(None)
            else:
                ratios.append(ours / theirs if higher_is_better else theirs / ours)
        spec = ",.0f" if higher_is_better else ",.1f"
        print(
            f"{label:32} {fmt(ours, spec):>10} {fmt(peers[0], spec):>14} {fmt(peers[1], spec):>10}"
            f" {fmt(ratios[0], '.1f') + '×' if ratios[0] else '—':>10}"
            f" {fmt(ratios[1], '.1f') + '×' if ratios[1] else '—':>9}"
        )
    cost = results.get("recoup/claim_cost", {})
    if "empty_ms" in cost:
        batch, far_future = int(cost["batch"]), int(cost["far_future"])
        print(
            f"claim of a due batch of {batch:,}: {cost['empty_ms']:.2f} ms with no other jobs,"
            f" {cost['loaded_ms']:.2f} ms beside {far_future:,} far-future jobs"
            f" ({cost['loaded_ms'] / cost['empty_ms']:.2f}×)"
        )
    elif "error" in cost:
        print(f"claim cost: failed: {cost['error']}")


if __name__ == "__main__":
    main()
