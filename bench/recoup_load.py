"""Recoup's workloads for the load benchmark (`bench/run.py`), on PostgreSQL or SQLite.

    .venv/bin/python bench/recoup_load.py WORKLOAD --db URL --n N [--concurrency C]
        [--rate R --seconds S]

WORKLOAD:
- prepare: insert N due no-op jobs (for a drain by several processes);
- drain_part: one worker process of a multi-process drain: prints `ready`, waits for a line
  on stdin (the driver's "go", sent to every process at once), runs as `recoup worker` does
  until nothing is left due (`Worker.run(stop_when_idle=True)`), then prints its end instant
  (`time.time()`) and how many jobs it claimed;
- steady: N = R × S jobs due at R per second over S seconds, starting a few seconds ahead, a
  worker already running; firing lag p50/p99/max (ms) of each job against its own instant;
- burst: N jobs due at one instant a few seconds ahead, a worker already running; the lag;
- burst_part: one worker process of a burst run by several (`bench/run.py` inserts the jobs):
  prints `ready` once running, stops at a line on stdin, then prints its jobs' lags;
- backlog: the cost of N far-future jobs (due over the next year): bytes per pending job, the
  due-now drain rate and the claim latency of a due batch without and beside them, and the
  time the retention pruning takes with them in the table.

Prints one JSON object on stdout (drain_part: its lines, see above).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import NewJob, PythonTarget
from recoup.jobs.store import ClaimParams
from recoup.jobs.worker import Worker, WorkerConfig
from recoup.storage import Store, open_store

BATCH = 5_000  # jobs per insert_many call
LEAD = 3.0  # seconds between the end of the enqueueing and the first due instant
CLAIM_BATCH = 1_000
DRAIN_PROBE = 20_000  # due jobs drained in the backlog's due-now probe


def insert(store: Store, instants: list[datetime], handler: str = "noop") -> None:
    target = PythonTarget(handler=handler)
    for offset in range(0, len(instants), BATCH):
        jobs = [NewJob(run_at=at, target=target) for at in instants[offset : offset + BATCH]]
        store.insert_many(jobs, now=datetime.now(UTC))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def noop_registry() -> HandlerRegistry:
    handlers = HandlerRegistry()

    async def noop(ctx: HandlerContext) -> None:
        return None

    handlers.add("noop", noop)
    return handlers


def burst_part(store: Store, concurrency: int) -> None:
    """One worker process of a burst run by several: prints `ready` once its worker runs, runs
    until a line on stdin (the driver's "stop", once every job of the burst succeeded), then
    prints the firing lag in ms of each `burst` job it started (JSON)."""
    lags: list[float] = []
    handlers = HandlerRegistry()

    async def record(ctx: HandlerContext) -> None:
        lags.append((datetime.now(UTC) - ctx.run_at).total_seconds() * 1000)

    handlers.add("burst", record)
    worker = Worker(
        store, WorkerConfig(concurrency=concurrency, schedules=False), handlers=handlers
    )

    async def main() -> None:
        task = asyncio.create_task(worker.run())
        await asyncio.wait_for(asyncio.to_thread(worker.started.wait), 60)
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        worker.request_stop()
        await task

    asyncio.run(main())
    print(json.dumps({"lags_ms": lags}), flush=True)


def drain_part(store: Store, concurrency: int) -> None:
    worker = Worker(
        store, WorkerConfig(concurrency=concurrency, schedules=False), handlers=noop_registry()
    )
    print("ready", flush=True)
    sys.stdin.readline()
    # The whole worker loop, as `recoup worker` runs it, stopped once nothing is due (as the
    # peers' drain modes stop): claims overlap running attempts, where `drain()` runs one
    # batch after another.
    asyncio.run(worker.run(stop_when_idle=True))
    count = worker.stats.claimed
    print(json.dumps({"end": time.time(), "count": count}), flush=True)


async def steady(store: Store, rate: float, seconds: float, concurrency: int) -> dict[str, Any]:
    n = round(rate * seconds)
    start = datetime.now(UTC) + timedelta(seconds=LEAD + n / 50_000)
    return await fire(store, [start + timedelta(seconds=i / rate) for i in range(n)], concurrency)


async def burst(store: Store, n: int, concurrency: int) -> dict[str, Any]:
    start = datetime.now(UTC) + timedelta(seconds=LEAD + n / 50_000)
    return await fire(store, [start] * n, concurrency)


async def fire(store: Store, instants: list[datetime], concurrency: int) -> dict[str, Any]:
    """Insert jobs due at `instants` (all ahead of now), run a worker, and measure each job's
    firing lag against its own instant."""
    n = len(instants)
    lags: list[float] = []
    done = asyncio.Event()
    handlers = HandlerRegistry()

    async def record(ctx: HandlerContext) -> None:
        lags.append((datetime.now(UTC) - ctx.run_at).total_seconds())
        if len(lags) >= n:
            done.set()

    handlers.add("steady", record)
    insert(store, instants, "steady")
    worker = Worker(
        store, WorkerConfig(concurrency=concurrency, schedules=False), handlers=handlers
    )
    task = asyncio.create_task(worker.run())
    try:
        last = (max(instants) - datetime.now(UTC)).total_seconds()
        await asyncio.wait_for(done.wait(), last + 60)
    finally:
        worker.request_stop()
        await task
    return {
        "jobs": n,
        "fired": len(lags),
        "lag_p50_ms": statistics.median(lags) * 1000,
        "lag_p99_ms": percentile(lags, 99) * 1000,
        "lag_max_ms": max(lags) * 1000,
    }


def claim_ms(store: Store) -> float:
    """The median time of claiming a full batch of due jobs (five probes)."""
    timings = []
    for _ in range(5):
        now = datetime.now(UTC)
        insert(store, [now] * CLAIM_BATCH)
        params = ClaimParams(
            worker_id="bench",
            now=now,
            horizon=timedelta(0),
            lease=timedelta(minutes=5),
            limit=CLAIM_BATCH,
        )
        began = time.perf_counter()
        claimed = store.claim_due(params)
        timings.append(time.perf_counter() - began)
        assert len(claimed) == CLAIM_BATCH, len(claimed)  # a claim that found nothing times nothing
        assert all(job.run_at <= now for job in claimed)
    return statistics.median(timings) * 1000


def drain_rate(store: Store, concurrency: int) -> float:
    insert(store, [datetime.now(UTC)] * DRAIN_PROBE)
    analyze(store)
    worker = Worker(
        store, WorkerConfig(concurrency=concurrency, schedules=False), handlers=noop_registry()
    )
    began = time.perf_counter()
    count = worker.drain()
    assert count >= DRAIN_PROBE, count
    return DRAIN_PROBE / (time.perf_counter() - began)


def analyze(store: Store) -> None:
    """Fresh planner statistics (PostgreSQL: what autovacuum does soon after a bulk insert)."""
    if hasattr(store, "url"):
        import psycopg

        with psycopg.connect(store.url, autocommit=True) as conn:  # type: ignore[attr-defined]
            conn.execute(f"ANALYZE {store.schema}.jobs")  # type: ignore[attr-defined]
    else:
        import sqlite3

        with contextlib.closing(sqlite3.connect(store.path)) as conn:  # type: ignore[attr-defined]
            conn.execute("ANALYZE")


def database_bytes(store: Store) -> int:
    if hasattr(store, "url"):
        import psycopg

        with psycopg.connect(store.url, autocommit=True) as conn:  # type: ignore[attr-defined]
            row = conn.execute(
                "SELECT pg_total_relation_size(%s)",
                (f"{store.schema}.jobs",),  # type: ignore[attr-defined]
            ).fetchone()
            assert row is not None
            return int(row[0])
    path = store.path  # type: ignore[attr-defined]
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def backlog(store: Store, n: int, concurrency: int) -> dict[str, Any]:
    empty_claim = claim_ms(store)
    empty_drain = drain_rate(store, concurrency)
    before = database_bytes(store)
    now = datetime.now(UTC)
    year = timedelta(days=365).total_seconds()
    began = time.perf_counter()
    for offset in range(0, n, 100_000):
        count = min(100_000, n - offset)
        insert(store, [now + timedelta(seconds=60 + (offset + i) * year / n) for i in range(count)])
    insert_s = time.perf_counter() - began
    analyze(store)
    per_job = (database_bytes(store) - before) / n
    loaded_claim = claim_ms(store)
    loaded_drain = drain_rate(store, concurrency)
    # Retention beside the backlog: the drained jobs are final, their keep_for is past a
    # year from now; pruning them must not read the pending backlog.
    began = time.perf_counter()
    pruned = store.prune(now=now + timedelta(days=400), keep_runs_for=timedelta(0), limit=10_000)
    prune_s = time.perf_counter() - began
    return {
        "backlog": n,
        "insert_jobs_per_s": n / insert_s,
        "bytes_per_pending_job": per_job,
        "claim_ms_empty": empty_claim,
        "claim_ms_loaded": loaded_claim,
        "drain_jobs_per_s_empty": empty_drain,
        "drain_jobs_per_s_loaded": loaded_drain,
        "drain_cost": 1 - loaded_drain / empty_drain,
        "prune_ms": prune_s * 1000,
        "pruned_jobs": pruned.jobs,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "workload", choices=["prepare", "drain_part", "burst_part", "steady", "burst", "backlog"]
    )
    parser.add_argument("--db", required=True, help="postgresql://… or sqlite:///path")
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    store = open_store(args.db)
    try:
        if args.workload == "drain_part":
            drain_part(store, args.concurrency)
            return
        if args.workload == "burst_part":
            burst_part(store, args.concurrency)
            return
        result: dict[str, Any]
        if args.workload == "prepare":
            began = time.perf_counter()
            insert(store, [datetime.now(UTC)] * args.n)
            result = {"inserted": args.n, "jobs_per_s": args.n / (time.perf_counter() - began)}
            analyze(store)
        elif args.workload == "steady":
            result = asyncio.run(steady(store, args.rate, args.seconds, args.concurrency))
        elif args.workload == "burst":
            result = asyncio.run(burst(store, args.n, args.concurrency))
        else:
            result = backlog(store, args.n, args.concurrency)
    finally:
        store.close()
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
