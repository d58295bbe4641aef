"""Crash recovery benchmark: how long after `kill -9` of a worker its jobs are handed back.

    .venv/bin/python bench/bench_rescue.py [--runs 5] [--jobs 10] [--dsn postgresql://…/test]

Per run, on a fresh database (SQLite: a file; PostgreSQL: a schema): a `recoup worker` process
claims `--jobs` jobs whose handler never ends, then another worker (in this process) starts
beside it; at a random moment of the second worker's second, the first is killed with SIGKILL,
and the time from the kill until every one of its jobs has a `lost` run (handed back, ready to
run again) is measured. Leases are
the default 30 s: without worker sessions (ARCHITECTURE.md, 'Worker sessions') the jobs would
wait for them, plus up to half a lease for the next rescue. Prints median, min and max per
backend. The machine's load shows in the figures: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import JobState, PythonTarget, RunOutcome
from recoup.jobs.scheduler import Scheduler
from recoup.storage import open_store

HERE = Path(__file__).resolve().parent
DEADLINE = 60.0  # seconds any wait may take before the run is abandoned

# The jobs' handler, for the killed worker (`--handlers bench_rescue:REGISTRY`) and the other.
REGISTRY = HandlerRegistry()


@REGISTRY.register("hang")
async def hang(ctx: HandlerContext) -> None:
    await asyncio.sleep(3600)


def wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)


@contextmanager
def database(backend: str, dsn: str) -> Iterator[tuple[list[str], dict[str, Any]]]:
    """(the CLI's --db options, `open_store` keywords) of a fresh database, dropped after."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/rescue.db"
            yield ["--db", url], {"url": url}
        return
    import psycopg

    schema = f"bench_rescue_{uuid.uuid4().hex[:8]}"
    try:
        yield ["--db", dsn, "--schema", schema], {"url": dsn, "schema": schema}
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def one_run(backend: str, dsn: str, jobs: int) -> float:
    with database(backend, dsn) as (db_args, opts):
        store = open_store(opts.pop("url"), **opts)
        scheduler = Scheduler(store)
        ids = [
            job.id
            for job in (
                scheduler.enqueue(PythonTarget(handler="hang"), timeout=timedelta(hours=1))
                for _ in range(jobs)
            )
        ]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
        victim = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "recoup",
                "worker",
                *db_args,
                "--handlers",
                "bench_rescue:REGISTRY",
                "--concurrency",
                str(jobs),
                "--worker-id",
                "victim",
            ],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(lambda: store.count_live()[JobState.RUNNING] == jobs, "the claims")
            with scheduler.running_worker(handlers=REGISTRY, grace=timedelta(0)):
                # A kill at any moment of the other worker's second between checks.
                time.sleep(random.uniform(0.0, 1.0))
                killed = time.monotonic()
                victim.send_signal(signal.SIGKILL)
                victim.wait(DEADLINE)

                def handed_back() -> bool:
                    return all(
                        any(r.outcome is RunOutcome.LOST for r in store.runs("default", job_id))
                        for job_id in ids
                    )

                wait_for(handed_back, "the hand-back")
                return time.monotonic() - killed
        finally:
            if victim.poll() is None:
                victim.kill()
                victim.wait(DEADLINE)
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=10, help="jobs the killed worker holds")
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    logging.getLogger("recoup").setLevel(logging.ERROR)  # each hand-back is logged as a warning
    print(
        f"kill -9 → every job handed back ({args.jobs} jobs held, {args.runs} runs per backend,"
        " lease 30 s)"
    )
    print(f"{'backend':<12}{'median':>9}{'min':>9}{'max':>9}   runs (s)")
    for backend in args.backends.split(","):
        times = [one_run(backend, args.dsn, args.jobs) for _ in range(args.runs)]
        print(
            f"{backend:<12}{statistics.median(times):>8.2f}s{min(times):>8.2f}s"
            f"{max(times):>8.2f}s   {' '.join(f'{t:.2f}' for t in times)}"
        )


if __name__ == "__main__":
    main()
