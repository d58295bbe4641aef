"""The benchmark's workloads for Recoup on PostgreSQL (the same ones peers_workloads.py runs).

    .venv/bin/python bench/recoup_workloads.py WORKLOAD --dsn DSN --n N [--concurrency C]

WORKLOAD: enqueue | drain | drain_inline | burst | claim_cost. Prints one JSON object on stdout.
The handler is an async no-op, as in the peers' workloads; drain_inline runs the same drain with
a sync no-op registered `inline=True` (Recoup's fast path, no peer equivalent: reported apart).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import NewJob, PythonTarget
from recoup.jobs.store import ClaimParams
from recoup.jobs.worker import Worker, WorkerConfig
from recoup.storage.postgres.store import PostgresStore

BURST_LEAD = 3.0  # seconds between enqueueing the burst and its due instant
BATCH = 5_000  # jobs per insert_many call
CLAIM_BATCH = 1_000  # jobs per claim in the claim-cost probe
NOOP = PythonTarget(handler="noop")


def new_jobs(count: int, run_at: datetime, handler: str = "noop") -> list[NewJob]:
    target = NOOP if handler == "noop" else PythonTarget(handler=handler)
    return [NewJob(run_at=run_at, target=target) for _ in range(count)]


def enqueue(store: PostgresStore, count: int, run_at: datetime, handler: str = "noop") -> None:
    for offset in range(0, count, BATCH):
        jobs = new_jobs(min(BATCH, count - offset), run_at, handler)
        store.insert_many(jobs, now=datetime.now(UTC))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run_worker_until(worker: Worker, done: asyncio.Event, timeout: float) -> None:
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(done.wait(), timeout)
    finally:
        worker.request_stop()
        await task


async def drain(
    store: PostgresStore, n: int, concurrency: int, *, inline: bool = False
) -> dict[str, float]:
    enqueue(store, n, datetime.now(UTC))
    with psycopg.connect(store.url, autocommit=True) as conn:  # as the peers' drains do
        conn.execute("ANALYZE")
    handlers = HandlerRegistry()
    done = asyncio.Event()
    count = 0

    def count_one() -> None:
        nonlocal count
        count += 1
        if count >= n:
            done.set()

    async def noop(ctx: HandlerContext) -> None:
        count_one()

    def noop_inline(ctx: HandlerContext) -> None:
        count_one()

    if inline:
        handlers.add("noop", noop_inline, inline=True)
    else:
        handlers.add("noop", noop)
    worker = Worker(
        store, WorkerConfig(concurrency=concurrency, schedules=False), handlers=handlers
    )
    start = time.perf_counter()
    await run_worker_until(worker, done, timeout=600)
    elapsed = time.perf_counter() - start
    succeeded = store.count_by_state().get("succeeded", 0)  # type: ignore[call-overload]
    return {"jobs_per_s": n / elapsed, "succeeded": float(succeeded)}


async def burst(store: PostgresStore, n: int, concurrency: int) -> dict[str, float]:
    handlers = HandlerRegistry()
    done = asyncio.Event()
    lags: list[float] = []

    async def record(ctx: HandlerContext) -> None:
        lags.append((datetime.now(UTC) - ctx.run_at).total_seconds())
        if len(lags) >= n:
            done.set()

    handlers.add("burst", record)
    worker = Worker(
        store, WorkerConfig(concurrency=concurrency, schedules=False), handlers=handlers
    )
    task = asyncio.create_task(run_worker_until(worker, done, timeout=BURST_LEAD + 60))
    await asyncio.sleep(0.5)  # the worker is up and idle, as in the peers' runs
    due = datetime.now(UTC) + timedelta(seconds=BURST_LEAD)
    await asyncio.to_thread(enqueue, store, n, due, "burst")
    await task
    return {
        "fired": float(len(lags)),
        "lag_p50_ms": statistics.median(lags) * 1000,
        "lag_p99_ms": percentile(lags, 99) * 1000,
        "lag_max_ms": max(lags) * 1000,
    }


def claim_cost(store: PostgresStore, far_future: int) -> dict[str, Any]:
    """The time to claim a due batch, alone and beside `far_future` jobs due in a year."""

    def probe() -> float:
        now = datetime.now(UTC)
        enqueue(store, CLAIM_BATCH, now)
        params = ClaimParams(
            worker_id="bench",
            now=now,
            horizon=timedelta(0),
            lease=timedelta(minutes=5),
            limit=CLAIM_BATCH,
        )
        timings = []
        for _ in range(5):
            start = time.perf_counter()
            claimed = store.claim_due(params)
            timings.append(time.perf_counter() - start)
            # A full batch, all of it due now: a claim that found nothing would time nothing.
            assert len(claimed) == CLAIM_BATCH, len(claimed)
            assert all(job.run_at <= now for job in claimed)
            enqueue(store, CLAIM_BATCH, now)
        return statistics.median(timings) * 1000

    empty = probe()
    enqueue(store, far_future, datetime.now(UTC) + timedelta(days=365))
    with psycopg.connect(store.url, autocommit=True) as conn:  # fresh planner statistics
        conn.execute(f"ANALYZE {store.schema}.jobs")
    loaded = probe()
    return {"batch": CLAIM_BATCH, "empty_ms": empty, "loaded_ms": loaded, "far_future": far_future}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "workload", choices=["enqueue", "drain", "drain_inline", "burst", "claim_cost"]
    )
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    store = PostgresStore(args.dsn, max_size=8)
    result: dict[str, Any]
    try:
        if args.workload == "enqueue":
            start = time.perf_counter()
            enqueue(store, args.n, datetime.now(UTC))
            result = {"jobs_per_s": args.n / (time.perf_counter() - start)}
        elif args.workload == "drain":
            result = asyncio.run(drain(store, args.n, args.concurrency))
        elif args.workload == "drain_inline":
            result = asyncio.run(drain(store, args.n, args.concurrency, inline=True))
        elif args.workload == "burst":
            result = asyncio.run(burst(store, args.n, args.concurrency))
        else:
            result = claim_cost(store, args.n)
    finally:
        store.close()
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
