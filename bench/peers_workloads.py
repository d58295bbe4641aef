"""The benchmark's workloads for the peer queues (procrastinate, pgqueuer).

Runs inside the peers' own virtual environment (`bench/.peers`, made by bench_scheduler.py),
never imported by Recoup. Each call prints one JSON object on stdout:

    python peers_workloads.py PEER WORKLOAD --dsn DSN --n N [--concurrency C]

PEER: procrastinate | pgqueuer. WORKLOAD: enqueue | enqueue_one | drain | burst (enqueue_one:
N jobs one at a time through the peer's public API, as an application defers one job). The
database at DSN is the peer's own, created empty by the driver.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

BURST_LEAD = 3.0  # seconds between enqueueing the burst and its due instant
BATCH = 5_000  # jobs per enqueue call


def analyze(dsn: str) -> None:
    """ANALYZE the peer's fresh database after enqueueing a drain's jobs, as autovacuum would
    soon after on most servers (the one these figures come from runs without it): no system
    should drain on plans made from an empty table's statistics. Recoup does the same."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def one_by_one(enqueue: Callable[[], Awaitable[Any]], n: int) -> dict[str, float]:
    """Call `enqueue` n times, one after the other; the rate and each call's latency."""
    latencies: list[float] = []
    start = time.perf_counter()
    for _ in range(n):
        began = time.perf_counter()
        await enqueue()
        latencies.append(time.perf_counter() - began)
    elapsed = time.perf_counter() - start
    return {
        "jobs_per_s": n / elapsed,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
    }


# procrastinate ------------------------------------------------------------------------------


async def procrastinate_run(workload: str, dsn: str, n: int, concurrency: int) -> dict[str, float]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))
    lags: list[float] = []

    @app.task(name="noop")
    async def noop() -> None:  # an async no-op, as every system's drain runs
        return None

    @app.task(name="burst", pass_context=True)
    def burst(context: procrastinate.JobContext) -> None:
        due = context.job.scheduled_at
        assert due is not None
        lags.append((datetime.now(UTC) - due).total_seconds())

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        if workload == "enqueue_one":
            return await one_by_one(lambda: noop.defer_async(), n)
        if workload == "enqueue":
            start = time.perf_counter()
            for offset in range(0, n, BATCH):
                await noop.batch_defer_async(*({} for _ in range(min(BATCH, n - offset))))
            return {"jobs_per_s": n / (time.perf_counter() - start)}
        if workload == "drain":
            for offset in range(0, n, BATCH):
                await noop.batch_defer_async(*({} for _ in range(min(BATCH, n - offset))))
            analyze(dsn)
            start = time.perf_counter()
            await app.run_worker_async(concurrency=concurrency, wait=False)
            return {"jobs_per_s": n / (time.perf_counter() - start)}
        due_at = datetime.now(UTC) + timedelta(seconds=BURST_LEAD)
        deferrer = burst.configure(schedule_at=due_at)
        for offset in range(0, n, BATCH):
            await deferrer.batch_defer_async(*({} for _ in range(min(BATCH, n - offset))))
        worker = asyncio.create_task(
            app.run_worker_async(concurrency=concurrency, wait=True, install_signal_handlers=False)
        )
        deadline = time.monotonic() + BURST_LEAD + 60
        while len(lags) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        worker.cancel()
        try:
            await worker
        except (asyncio.CancelledError, Exception):
            pass
        return lag_summary(lags, n)


# pgqueuer ---------------------------------------------------------------------------------


async def pgqueuer_run(workload: str, dsn: str, n: int, concurrency: int) -> dict[str, float]:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    connection = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(connection))
    await queries.install()

    async def enqueue(entrypoint: str, count: int, after: timedelta | None = None) -> None:
        for offset in range(0, count, BATCH):
            size = min(BATCH, count - offset)
            await queries.enqueue(
                [entrypoint] * size,
                [None] * size,
                [0] * size,
                execute_after=[after] * size if after is not None else None,
            )

    if workload == "enqueue_one":
        return await one_by_one(lambda: queries.enqueue("noop", None), n)
    if workload == "enqueue":
        start = time.perf_counter()
        await enqueue("noop", n)
        return {"jobs_per_s": n / (time.perf_counter() - start)}

    manager = QueueManager(Queries(AsyncpgDriver(await asyncpg.connect(dsn))))
    lags: list[float] = []

    @manager.entrypoint("noop")
    async def noop(job: Job) -> None:
        return None

    @manager.entrypoint("burst")
    async def burst(job: Job) -> None:
        lags.append((datetime.now(UTC) - job.execute_after).total_seconds())
        if len(lags) >= n:
            manager.shutdown.set()

    batch = max(1, concurrency // 2)
    if workload == "drain":
        await enqueue("noop", n)
        analyze(dsn)
        start = time.perf_counter()
        await manager.run(
            batch_size=batch,
            max_concurrent_tasks=concurrency,
            mode=QueueExecutionMode.drain,
            dequeue_timeout=timedelta(seconds=1),
        )
        return {"jobs_per_s": n / (time.perf_counter() - start)}
    await enqueue("burst", n, timedelta(seconds=BURST_LEAD))
    await asyncio.wait_for(
        manager.run(
            batch_size=batch,
            max_concurrent_tasks=concurrency,
            dequeue_timeout=timedelta(seconds=1),
        ),
        timeout=BURST_LEAD + 60,
    )
    return lag_summary(lags, n)


def lag_summary(lags: list[float], n: int) -> dict[str, float]:
    if not lags:
        return {"fired": 0}
    return {
        "fired": len(lags),
        "expected": n,
        "lag_p50_ms": statistics.median(lags) * 1000,
        "lag_p99_ms": percentile(lags, 99) * 1000,
        "lag_max_ms": max(lags) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=["procrastinate", "pgqueuer"])
    parser.add_argument("workload", choices=["enqueue", "enqueue_one", "drain", "burst"])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
    run = procrastinate_run if args.peer == "procrastinate" else pgqueuer_run
    result = asyncio.run(run(args.workload, args.dsn, args.n, args.concurrency))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
