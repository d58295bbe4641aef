"""The benchmark's workloads for the peer queues (procrastinate, pgqueuer).

Runs inside the peers' own virtual environment (`bench/.peers`, made by bench_scheduler.py),
never imported by Recoup. Each call prints one JSON object on stdout:

    python peers_workloads.py PEER WORKLOAD --dsn DSN --n N [--concurrency C]

PEER: procrastinate | pgqueuer. WORKLOAD: enqueue | enqueue_one | drain | burst | prepare |
drain_part | steady (enqueue_one: N jobs one at a time through the peer's public API, as an
application defers one job; prepare + drain_part: a drain by several processes, as
`recoup_load.py` describes; steady: N jobs due at `--rate` per second). The database at DSN is
the peer's own, created empty by the driver.
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
STEADY_BUCKET = 0.1  # seconds: steady jobs are deferred in batches sharing one instant
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


async def procrastinate_run(
    workload: str, dsn: str, n: int, concurrency: int, rate: float
) -> dict[str, float]:
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
        if workload != "drain_part":
            await app.schema_manager.apply_schema_async()
        if workload == "prepare":
            for offset in range(0, n, BATCH):
                await noop.batch_defer_async(*({} for _ in range(min(BATCH, n - offset))))
            analyze(dsn)
            return {"inserted": n}
        if workload == "drain_part":
            ready_then_go()
            await app.run_worker_async(concurrency=concurrency, wait=False)
            return {"end": time.time()}
        if workload == "steady":
            start = steady_start(n, rate)
            for at, size in steady_buckets(n, rate):
                deferrer = burst.configure(schedule_at=start + timedelta(seconds=at))
                await deferrer.batch_defer_async(*({} for _ in range(size)))
            return await run_until_fired(
                app.run_worker_async(
                    concurrency=concurrency, wait=True, install_signal_handlers=False
                ),
                lags,
                n,
                (start - datetime.now(UTC)).total_seconds() + n / rate + 60,
            )
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


async def pgqueuer_run(
    workload: str, dsn: str, n: int, concurrency: int, rate: float
) -> dict[str, float]:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    connection = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(connection))
    if workload != "drain_part":
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

    if workload == "prepare":
        await enqueue("noop", n)
        analyze(dsn)
        return {"inserted": n}
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
    if workload == "drain_part":
        ready_then_go()
        await manager.run(
            batch_size=batch,
            max_concurrent_tasks=concurrency,
            mode=QueueExecutionMode.drain,
            dequeue_timeout=timedelta(seconds=1),
        )
        return {"end": time.time()}
    if workload == "steady":
        start = steady_start(n, rate)
        for at, size in steady_buckets(n, rate):
            after = start + timedelta(seconds=at) - datetime.now(UTC)
            await queries.enqueue(
                ["burst"] * size, [None] * size, [0] * size, execute_after=[after] * size
            )
        return await run_until_fired(
            manager.run(
                batch_size=batch,
                max_concurrent_tasks=concurrency,
                dequeue_timeout=timedelta(seconds=1),
            ),
            lags,
            n,
            (start - datetime.now(UTC)).total_seconds() + n / rate + 60,
        )
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


def ready_then_go() -> None:
    """Say `ready` and wait for the driver's go (one line on stdin), sent to every process of
    a multi-process drain at once."""
    print("ready", flush=True)
    sys.stdin.readline()


def steady_start(n: int, rate: float) -> datetime:
    """The first steady job's instant: after the enqueueing of all of them is surely done."""
    return datetime.now(UTC) + timedelta(seconds=BURST_LEAD + n / 2_000)


def steady_buckets(n: int, rate: float) -> list[tuple[float, int]]:
    """(seconds after the start, jobs) per bucket: n jobs at `rate` per second."""
    per_bucket = max(1, round(rate * STEADY_BUCKET))
    return [(offset / rate, min(per_bucket, n - offset)) for offset in range(0, n, per_bucket)]


async def run_until_fired(
    worker: Awaitable[Any], lags: list[float], n: int, timeout: float
) -> dict[str, float]:
    task = asyncio.ensure_future(worker)
    deadline = time.monotonic() + timeout
    while len(lags) < n and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):
        pass
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
    parser.add_argument(
        "workload",
        choices=["enqueue", "enqueue_one", "drain", "burst", "prepare", "drain_part", "steady"],
    )
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--rate", type=float, default=500.0)
    args = parser.parse_args()
    run = procrastinate_run if args.peer == "procrastinate" else pgqueuer_run
    result = asyncio.run(run(args.workload, args.dsn, args.n, args.concurrency, args.rate))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
