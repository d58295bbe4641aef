"""Flow control, measured (issue 23, item 7): on each backend, with two `recoup worker`
processes on one database,

- **rate**: `--jobs` jobs (10,000) of one key limited to `--rate` starts a second, all due at
  once: the most starts in any one-second window (must be ≤ the rate), from the run log's
  start instants;
- **parallelism**: `--par-jobs` jobs of one key with a parallelism of `--parallelism`, each
  running `--hold` seconds: the most running at once (must be ≤ the parallelism), from the run
  log's start and end instants;
- **cost**: the throughput of `--plain` jobs (20,000) without a key, alone (after a warm-up
  batch) and then beside a throttled key's backlog (as many jobs, limited to
  `--throttled-rate` a second, due at the same moment): jobs a second from the first start
  to the last end (5,000 plain jobs finish in under a second, and the ratio then swung by
  ±30% between runs);
- **many keys**: `--keys` keys (2,000) of `--per-key` jobs each, every key limited to one start
  per `--key-period` seconds, all due at once: how long they take (ideally about
  `(per-key - 1) × key-period`), how many keys started within the first period (ideally all:
  no key waits behind the throttled others), and the most starts of one key in any period
  (must be ≤ 1). `--keys 0` leaves it out.

    .venv/bin/python bench/bench_flow.py [--backends sqlite,postgresql] [--dsn …]

The machine's load shows in the figures: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import NewJob, PythonTarget
from recoup.jobs.scheduler import Scheduler
from recoup.storage import open_store
from recoup.storage.job_rows import from_micros

HERE = Path(__file__).resolve().parent
DEADLINE = 600.0  # seconds a scenario may take before the run is abandoned

REGISTRY = HandlerRegistry()
HOLD_SECONDS = float(os.environ.get("BENCH_FLOW_HOLD", "0.05"))


@REGISTRY.register("noop")
def noop(ctx: HandlerContext) -> None:
    return None


@REGISTRY.register("hold")
async def hold(ctx: HandlerContext) -> None:
    await asyncio.sleep(HOLD_SECONDS)


@dataclass
class Db:
    backend: str
    cli: list[str]
    url: str
    schema: str | None

    def open(self) -> Any:
        return open_store(self.url, **({} if self.schema is None else {"schema": self.schema}))

    def keyed_starts(self, group: str) -> list[tuple[str, datetime]]:
        """(flow_key, started_at) of every run of the jobs of `group`."""
        query = (
            "SELECT j.flow_key, r.started_at FROM runs r JOIN jobs j ON j.id = r.job_id "
            "WHERE j.job_group = {p}"
        )
        if self.backend == "sqlite":
            path = self.url.removeprefix("sqlite:///")
            with sqlite3.connect(path) as conn:
                rows = conn.execute(query.format(p="?"), (group,)).fetchall()
            return [(key, from_micros(at)) for key, at in rows]
        import psycopg

        with psycopg.connect(self.url) as conn:
            conn.execute(f'SET search_path TO "{self.schema}"')
            return list(conn.execute(query.format(p="%s"), (group,)).fetchall())

    def intervals(self, group: str) -> list[tuple[datetime, datetime]]:
        """(started_at, finished_at) of every run of the jobs of `group`."""
        query = (
            "SELECT r.started_at, r.finished_at FROM runs r JOIN jobs j ON j.id = r.job_id "
            "WHERE j.job_group = {p}"
        )
        if self.backend == "sqlite":
            path = self.url.removeprefix("sqlite:///")
            with sqlite3.connect(path) as conn:
                rows = conn.execute(query.format(p="?"), (group,)).fetchall()
            return [(from_micros(a), from_micros(b)) for a, b in rows]
        import psycopg

        with psycopg.connect(self.url) as conn:
            conn.execute(f'SET search_path TO "{self.schema}"')
            return list(conn.execute(query.format(p="%s"), (group,)).fetchall())


@contextmanager
def database(backend: str, dsn: str) -> Iterator[Db]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/flow.db"
            yield Db(backend, ["--db", url], url, None)
        return
    import psycopg

    schema = f"bench_flow_{uuid.uuid4().hex[:8]}"
    try:
        yield Db(backend, ["--db", dsn, "--schema", schema], dsn, schema)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def workers(db: Db, count: int = 2) -> Iterator[None]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path]),
        "BENCH_FLOW_HOLD": str(HOLD_SECONDS),
    }
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "recoup",
                "worker",
                *db.cli,
                "--handlers",
                "bench_flow:REGISTRY",
                "--worker-id",
                f"bench-{n}",
                "--log-level",
                "error",
            ],
            env=env,
            stderr=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        for n in range(count)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def wait_done(store: Any, total: int) -> None:
    deadline = time.monotonic() + DEADLINE
    while True:
        live = store.count_live()
        if sum(live.values()) == 0:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out with {live} of {total} jobs live")
        time.sleep(0.2)


def most_in_window(starts: Sequence[datetime], window: timedelta) -> int:
    """The most instants in any half-open window [t, t + window)."""
    ordered = sorted(starts)
    most, first = 0, 0
    for last, at in enumerate(ordered):
        while at - ordered[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


def most_at_once(intervals: Sequence[tuple[datetime, datetime]]) -> int:
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    running = most = 0
    for _, step in events:  # an end sorts before a start at the same instant
        running += step
        most = max(most, running)
    return most


def throughput(intervals: Sequence[tuple[datetime, datetime]]) -> float:
    first = min(a for a, _ in intervals)
    last = max(b for _, b in intervals)
    return len(intervals) / max((last - first).total_seconds(), 1e-9)


def jobs(count: int, handler: str, group: str, now: datetime, **flow: Any) -> list[NewJob]:
    target = PythonTarget(handler=handler)
    return [NewJob(run_at=now, target=target, group=group, **flow) for _ in range(count)]


def run_backend(
    backend: str, args: argparse.Namespace, *, cost: bool = True, dsn: str | None = None
) -> dict[str, Any]:
    """One backend's figures (`cost=False` leaves out the throughput comparison)."""
    found: dict[str, Any] = {}
    with database(backend, dsn or args.dsn) as db:
        store = db.open()
        store.migrate()
        scheduler = Scheduler(store)
        scheduler.enqueue(PythonTarget(handler="noop"))  # makes the default tenant
        with workers(db):
            wait_done(store, 1)
            if cost:
                found.update(measure_cost(db, store, scheduler, args))
            # Rate.
            now = datetime.now(UTC)
            began = time.monotonic()
            scheduler.enqueue_many(
                jobs(args.jobs, "noop", "rate", now, flow_key="rate", flow_rate=args.rate)
            )
            wait_done(store, args.jobs)
            found["rate_seconds"] = time.monotonic() - began
            starts = [a for a, _ in db.intervals("rate")]
            found["rate_runs"] = len(starts)
            found["rate_max_window"] = most_in_window(starts, timedelta(seconds=1))
            # Parallelism.
            now = datetime.now(UTC)
            scheduler.enqueue_many(
                jobs(
                    args.par_jobs,
                    "hold",
                    "par",
                    now,
                    flow_key="par",
                    flow_parallelism=args.parallelism,
                )
            )
            wait_done(store, args.par_jobs)
            spans = db.intervals("par")
            found["par_runs"] = len(spans)
            found["par_max"] = most_at_once(spans)
            found["par_throughput"] = throughput(spans)
            if args.keys > 0:
                found.update(measure_keys(db, store, scheduler, args))
        store.close()
    return found


def measure_cost(
    db: Db, store: Any, scheduler: Scheduler, args: argparse.Namespace
) -> dict[str, Any]:
    """Plain jobs' throughput alone (after a warm-up batch) and beside a throttled key's
    backlog due at the same moment."""
    found: dict[str, Any] = {}
    for group in ("warm-up", "plain-alone"):
        scheduler.enqueue_many(jobs(args.plain, "noop", group, datetime.now(UTC)))
        wait_done(store, args.plain)
    found["alone"] = throughput(db.intervals("plain-alone"))
    now = datetime.now(UTC)
    scheduler.enqueue_many(
        jobs(
            args.plain,
            "noop",
            "throttled",
            now,
            flow_key="throttled",
            flow_rate=args.throttled_rate,
        )
        + jobs(args.plain, "noop", "plain-beside", now)
    )
    deadline = time.monotonic() + DEADLINE
    while len(db.intervals("plain-beside")) < args.plain and time.monotonic() < deadline:
        time.sleep(0.2)
    found["beside"] = throughput(db.intervals("plain-beside"))
    found["throttled_during"] = len(db.intervals("throttled"))
    scheduler.cancel_group("throttled")
    wait_done(store, args.plain)
    return found


def measure_keys(
    db: Db, store: Any, scheduler: Scheduler, args: argparse.Namespace
) -> dict[str, Any]:
    """Many throttled keys at once: their time, the keys started within the first period, and
    the most starts of one key in any period."""
    period = timedelta(seconds=args.key_period)
    now = datetime.now(UTC)
    batch = [
        job
        for n in range(args.keys)
        for job in jobs(
            args.per_key, "noop", "keys", now, flow_key=f"k{n}", flow_rate=1, flow_period=period
        )
    ]
    began = time.monotonic()
    scheduler.enqueue_many(batch)
    wait_done(store, len(batch))
    seconds = time.monotonic() - began
    starts = db.keyed_starts("keys")
    first = min(at for _, at in starts)
    by_key: dict[str, list[datetime]] = {}
    for key, at in starts:
        by_key.setdefault(key, []).append(at)
    return {
        "keys_seconds": seconds,
        "keys_runs": len(starts),
        "keys_first_period": sum(1 for ats in by_key.values() if min(ats) < first + period),
        "keys_max_window": max(most_in_window(ats, period) for ats in by_key.values()),
    }


def defaults() -> argparse.Namespace:
    return parser().parse_args([])


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    found.add_argument("--backends", default="sqlite,postgresql")
    found.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    found.add_argument("--jobs", type=int, default=10_000, help="jobs of the rate-limited key")
    found.add_argument("--rate", type=int, default=500, help="its starts a second")
    found.add_argument("--throttled-rate", type=int, default=20, help="the backlog's rate")
    found.add_argument("--par-jobs", type=int, default=400)
    found.add_argument("--parallelism", type=int, default=5)
    found.add_argument(
        "--plain",
        type=int,
        default=20_000,
        help="jobs without a key",
    )
    found.add_argument("--keys", type=int, default=2_000, help="keys of the many-keys run")
    found.add_argument("--per-key", type=int, default=3, help="jobs of each of those keys")
    found.add_argument("--key-period", type=float, default=2.0, help="seconds per start")
    found.add_argument("--no-cost", action="store_true", help="leave out the throughput comparison")
    return found


def main() -> None:
    args = parser().parse_args()
    print(
        f"two worker processes; rate key: {args.jobs} jobs at {args.rate}/s; parallelism "
        f"{args.parallelism} over {args.par_jobs} jobs of {HOLD_SECONDS}s; {args.plain} plain jobs"
    )
    for backend in args.backends.split(","):
        name = "sqlite" if backend == "sqlite" else "postgres"
        r = run_backend(name, args, cost=not args.no_cost)
        if not args.no_cost:
            loss = 1 - r["beside"] / r["alone"]
            print(
                f"{name:9} plain alone {r['alone']:8.0f} jobs/s, beside a throttled key "
                f"{r['beside']:8.0f} jobs/s ({loss:+.1%} lost; {r['throttled_during']} "
                f"throttled ran meanwhile)"
            )
        print(
            f"{name:9} rate {args.rate}/s: {r['rate_runs']} runs in {r['rate_seconds']:.1f} s, "
            f"most in any 1 s window {r['rate_max_window']} (≤ {args.rate}: "
            f"{'ok' if r['rate_max_window'] <= args.rate else 'EXCEEDED'})"
        )
        print(
            f"{name:9} parallelism {args.parallelism}: {r['par_runs']} runs, most at once "
            f"{r['par_max']} (≤ {args.parallelism}: "
            f"{'ok' if r['par_max'] <= args.parallelism else 'EXCEEDED'}), "
            f"{r['par_throughput']:.0f} jobs/s"
        )
        if args.keys > 0:
            print(
                f"{name:9} {args.keys} keys of {args.per_key} jobs at 1 per {args.key_period}s: "
                f"{r['keys_runs']} runs in {r['keys_seconds']:.1f} s, "
                f"{r['keys_first_period']} keys started in the first period (of {args.keys}), "
                f"most of one key in any period {r['keys_max_window']} (≤ 1: "
                f"{'ok' if r['keys_max_window'] <= 1 else 'EXCEEDED'})"
            )


if __name__ == "__main__":
    main()
