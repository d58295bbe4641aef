"""Every benchmark in one command: Recoup (PostgreSQL and SQLite) beside its peers, N runs,
the median and range of each figure, and ratios taken within each run.

    .venv/bin/python bench/run.py [--runs 3] [--quick] [--backlog 10000000] [--json FILE]
        [--dsn postgresql://postgres@127.0.0.1:5432/test]

The peers (procrastinate, pgqueuer) are installed from PyPI into their own environment
(`bench/.peers`) on first use and run as subprocesses on fresh databases of the same server;
every system gets a fresh database (or SQLite file) per workload. A run measures:

- enqueue one by one through the Python API and `POST /v1/jobs` through the HTTP API at 1 and
  16 connections beside a bare FastAPI endpoint (`bench_enqueue.py`);
- bulk enqueue of 100,000; drain of 100,000 due no-op jobs by one worker process and by two;
- firing lag of a burst of 10,000 due at one instant (one worker process at the peers'
  concurrency, and two processes of 5,000 attempts at once each), and of a steady 500 jobs/s
  for 60 s;
- a backlog of 10,000,000 jobs due over the next year: bytes per pending job, the due-now drain
  rate and claim latency beside it, and the retention pruning's cost (`recoup_load.py`);
- HTTP targets: 20,000 signed deliveries beside raw httpx and aiohttp (`bench_http.py`);
- the README's first command, `recoup demo`, from start to exit.

A ratio is computed in each run (Recoup's figure over the peer's, or the peer's lag over
Recoup's), then summarised like the figures: the median, and the range over the runs.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_scheduler import ensure_peers_env, fresh_database  # noqa: E402

PEERS = ("pgqueuer", "procrastinate")
BURST_LEAD = 3.0  # seconds between a multi-process burst's insert and its instant
BURST_CONCURRENCY = 5_000  # per process: every job of its half of the burst may start at once
Metrics = dict[str, float]


@dataclass(frozen=True)
class Sizes:
    bulk: int = 100_000
    drain: int = 100_000
    drain_procrastinate: int = 5_000  # ≈1k jobs/s: a full-size drain would take minutes
    burst: int = 10_000
    steady_rate: float = 500.0
    steady_seconds: float = 60.0
    backlog: int = 10_000_000
    http: int = 20_000
    one_by_one: int = 20_000
    http_seconds: float = 5.0


def run_json(argv: list[str], *, timeout: float = 3_600) -> dict[str, Any]:
    """Run a benchmark subprocess; its last stdout line is its JSON result."""
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env={**os.environ})
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-1:] or ["failed"]
        raise RuntimeError(f"{' '.join(argv[1:3])}: {tail[0]}")
    parsed: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return parsed


@contextlib.contextmanager
def ready_children(argv: list[str], count: int) -> Iterator[list[subprocess.Popen[str]]]:
    """`count` processes of `argv`, each started and past its `ready` line; any still running
    when the block ends is killed."""
    children = [
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{' '.join(argv[1:3])}: a process did not start")
        yield children
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


class Run:
    """One run of every workload; `metrics` maps `workload/system` to its figures."""

    def __init__(self, dsn: str, sizes: Sizes, peers_python: Path, tmp: Path) -> None:
        self.dsn = dsn
        self.sizes = sizes
        self.peers_python = peers_python
        self.tmp = tmp
        self.metrics: dict[str, Metrics] = {}

    def record(self, key: str, measure: Callable[[], dict[str, Any]]) -> None:
        began = time.perf_counter()
        try:
            result = measure()
        except Exception as exc:  # one failed figure must not hide the others
            print(f"  {key}: error: {exc}", file=sys.stderr)
            return
        figures = {k: float(v) for k, v in result.items() if isinstance(v, (int, float))}
        self.metrics[key] = figures
        print(f"  {key}: {figures} ({time.perf_counter() - began:.0f} s)", file=sys.stderr)

    # -- the systems' databases ---------------------------------------------------------------

    def recoup_db(self, backend: str, name: str) -> str:
        if backend == "postgresql":
            return fresh_database(self.dsn, f"bench_run_{name}")
        path = self.tmp / f"{name}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path}"

    def recoup(self, workload: str, db: str, **opts: float) -> dict[str, Any]:
        argv = [sys.executable, str(HERE / "recoup_load.py"), workload, "--db", db]
        for name, value in opts.items():
            argv += [f"--{name}", str(value)]
        return run_json(argv)

    def peer(self, peer: str, workload: str, dsn: str, n: int, **opts: float) -> dict[str, Any]:
        argv = [str(self.peers_python), str(HERE / "peers_workloads.py"), peer, workload]
        argv += ["--dsn", dsn, "--n", str(n)]
        for name, value in opts.items():
            argv += [f"--{name}", str(value)]
        return run_json(argv)

    # -- workloads ----------------------------------------------------------------------------

    def bulk_and_drains(self) -> None:
        s = self.sizes
        for backend in ("postgresql", "sqlite"):
            db = self.recoup_db(backend, "drain")
            self.record(
                f"bulk/recoup-{backend}", functools.partial(self.recoup, "prepare", db, n=s.bulk)
            )
            self.record(f"drain1/recoup-{backend}", functools.partial(self.drain_parts, db, 1))
            db = self.recoup_db(backend, "drain2")
            self.recoup("prepare", db, n=s.drain)
            self.record(f"drain2/recoup-{backend}", functools.partial(self.drain_parts, db, 2))
        for peer in PEERS:
            n = s.drain_procrastinate if peer == "procrastinate" else s.drain
            conc = 10 if peer == "procrastinate" else 50
            dsn = fresh_database(self.dsn, f"bench_run_{peer}")
            self.record(f"bulk/{peer}", functools.partial(self.peer, peer, "enqueue", dsn, s.bulk))
            for processes in (1, 2):
                dsn = fresh_database(self.dsn, f"bench_run_{peer}")
                self.peer(peer, "prepare", dsn, n)
                self.record(
                    f"drain{processes}/{peer}",
                    functools.partial(
                        self.drain_parts, dsn, processes, peer=peer, n=n, concurrency=conc
                    ),
                )

    def burst_by_processes(self, db: str, processes: int, concurrency: int) -> dict[str, Any]:
        """A burst of `sizes.burst` jobs due at one instant, inserted while `processes` worker
        processes already run (each with `concurrency` attempts at once): every job's firing
        lag against its instant, over all of them."""
        from recoup_load import insert, percentile

        from recoup.jobs.model import JobState
        from recoup.storage import open_store

        argv = [sys.executable, str(HERE / "recoup_load.py"), "burst_part", "--db", db]
        argv += ["--concurrency", str(concurrency)]
        n = self.sizes.burst
        with ready_children(argv, processes) as children:
            store = open_store(db)
            try:
                insert(store, [datetime.now(UTC) + timedelta(seconds=BURST_LEAD)] * n, "burst")
                time.sleep(BURST_LEAD)
                deadline = time.monotonic() + 120
                while store.count_by_state().get(JobState.SUCCEEDED, 0) < n:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the burst did not finish within 120 s")
                    time.sleep(0.1)
            finally:
                store.close()
            lags: list[float] = []
            for child in children:
                out, _ = child.communicate("stop\n", timeout=60)
                if child.returncode != 0:
                    raise RuntimeError(f"a burst process failed ({child.returncode})")
                lags += json.loads(out.strip().splitlines()[-1])["lags_ms"]
        return {
            "fired": len(lags),
            "lag_p50_ms": percentile(lags, 50),
            "lag_p99_ms": percentile(lags, 99),
            "lag_max_ms": max(lags),
        }

    def drain_parts(
        self,
        db: str,
        processes: int,
        *,
        peer: str | None = None,
        n: int | None = None,
        concurrency: int = 50,
    ) -> dict[str, Any]:
        """Start `processes` workers, wait until each is ready, tell them all to go at once,
        and time from the go to the last one's end."""
        n = n or self.sizes.drain
        if peer is None:
            argv = [sys.executable, str(HERE / "recoup_load.py"), "drain_part", "--db", db]
        else:
            argv = [str(self.peers_python), str(HERE / "peers_workloads.py"), peer, "drain_part"]
            argv += ["--dsn", db, "--n", str(n)]
        argv += ["--concurrency", str(concurrency)]
        with ready_children(argv, processes) as children:
            go = time.time()
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            ends = []
            for child in children:
                out, _ = child.communicate(timeout=1_200)
                if child.returncode != 0:
                    raise RuntimeError(f"a drain process failed ({child.returncode})")
                ends.append(float(json.loads(out.strip().splitlines()[-1])["end"]))
        return {"jobs_per_s": n / (max(ends) - go)}

    def lags(self) -> None:
        s = self.sizes
        for backend in ("postgresql", "sqlite"):
            self.record(
                f"burst2/recoup-{backend}",
                functools.partial(
                    self.burst_by_processes,
                    self.recoup_db(backend, "burst2"),
                    2,
                    BURST_CONCURRENCY,
                ),
            )
            self.record(
                f"burst/recoup-{backend}",
                functools.partial(
                    self.recoup, "burst", self.recoup_db(backend, "burst"), n=s.burst
                ),
            )
            self.record(
                f"steady/recoup-{backend}",
                functools.partial(
                    self.recoup,
                    "steady",
                    self.recoup_db(backend, "steady"),
                    rate=s.steady_rate,
                    seconds=s.steady_seconds,
                ),
            )
        for peer in PEERS:
            conc = 10 if peer == "procrastinate" else 50
            self.record(
                f"burst/{peer}",
                functools.partial(
                    self.peer,
                    peer,
                    "burst",
                    fresh_database(self.dsn, f"bench_run_{peer}"),
                    s.burst,
                    concurrency=conc,
                ),
            )
            self.record(
                f"steady/{peer}",
                functools.partial(
                    self.peer,
                    peer,
                    "steady",
                    fresh_database(self.dsn, f"bench_run_{peer}"),
                    round(s.steady_rate * s.steady_seconds),
                    concurrency=conc,
                    rate=s.steady_rate,
                ),
            )

    def backlog(self, backends: tuple[str, ...]) -> None:
        for backend in backends:
            self.record(
                f"backlog/recoup-{backend}",
                functools.partial(
                    self.recoup, "backlog", self.recoup_db(backend, "backlog"), n=self.sizes.backlog
                ),
            )

    def enqueue_and_api(self) -> None:
        s = self.sizes
        argv = [sys.executable, str(HERE / "bench_enqueue.py"), "--json", "--dsn", self.dsn]
        argv += ["--n", str(s.one_by_one), "--seconds", str(s.http_seconds)]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=3_600)
        if out.returncode != 0:
            print(f"  bench_enqueue: error: {out.stderr.strip()[-300:]}", file=sys.stderr)
            return
        start = out.stdout.index("{")
        for system, figures in json.loads(out.stdout[start:]).items():
            numbers = {k: float(v) for k, v in figures.items() if isinstance(v, (int, float))}
            self.metrics[f"one/{system}"] = numbers
            print(f"  one/{system}: {numbers}", file=sys.stderr)

    def http_targets(self) -> None:
        argv = [sys.executable, str(HERE / "bench_http.py"), "--json", "--dsn", self.dsn]
        argv += ["--n", str(self.sizes.http)]
        self.record("http", lambda: run_json(argv))

    def first_command(self) -> None:
        """`recoup demo`, the README's first command, at its defaults on a fresh file: its
        wall time from the command's start to its exit, imports and report included."""

        def demo() -> dict[str, Any]:
            folder = Path(tempfile.mkdtemp(dir=self.tmp))
            argv = [sys.executable, "-m", "recoup", "demo", "--json", "--db", str(folder / "d.db")]
            began = time.perf_counter()
            out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            seconds = time.perf_counter() - began
            if out.returncode != 0:
                raise RuntimeError(f"recoup demo exited {out.returncode}")
            figures = json.loads(out.stdout)
            return {"seconds": seconds, "jobs": figures["jobs_run"]}

        self.record("demo", demo)


# -- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    label: str
    ours: str  # "workload/system:figure"
    against: tuple[str, ...]  # the same, for each comparison
    higher_is_better: bool = True
    target: float | None = None  # the ratio to reach against the first comparison
    below: float | None = None  # a bound the figure itself must stay under

    def ratio(self, run: dict[str, Metrics], other: str) -> float | None:
        a, b = figure(run, self.ours), figure(run, other)
        if a is None or b is None or a == 0 or b == 0:
            return None
        return a / b if self.higher_is_better else b / a


def figure(run: dict[str, Metrics], spec: str) -> float | None:
    key, name = spec.rsplit(":", 1)
    return run.get(key, {}).get(name)


def rows() -> list[Row]:
    out: list[Row] = []
    for backend in ("postgresql", "sqlite"):
        r = f"recoup-{backend}"
        out += [
            Row(
                f"single enqueue, jobs/s ({backend})",
                f"one/recoup ({backend}):jobs_per_s",
                ("one/pgqueuer:jobs_per_s", "one/procrastinate:jobs_per_s"),
                target=1.0,
            ),
            Row(
                f"single enqueue, p99 ms ({backend})",
                f"one/recoup ({backend}):p99_ms",
                ("one/pgqueuer:p99_ms",),
                higher_is_better=False,
            ),
            Row(
                f"POST /v1/jobs c=16, req/s ({backend})",
                f"one/recoup http ({backend}) c=16:requests_per_s",
                ("one/bare fastapi (ceiling) c=16:requests_per_s",),
                target=0.5,
            ),
            Row(
                f"POST /v1/jobs c=16, p99 ms ({backend})",
                f"one/recoup http ({backend}) c=16:p99_ms",
                ("one/bare fastapi (ceiling) c=16:p99_ms",),
                higher_is_better=False,
            ),
            Row(
                f"POST /v1/jobs c=16, 2 processes, req/s ({backend})",
                f"one/recoup http ({backend}) 2 processes c=16:requests_per_s",
                ("one/bare fastapi (ceiling) 2 processes c=16:requests_per_s",),
                target=0.5,
            ),
            Row(
                f"POST /v1/jobs c=16, 2 processes, p99 ms ({backend})",
                f"one/recoup http ({backend}) 2 processes c=16:p99_ms",
                ("one/bare fastapi (ceiling) 2 processes c=16:p99_ms",),
                higher_is_better=False,
            ),
            Row(
                f"POST /v1/jobs c=1, req/s ({backend})",
                f"one/recoup http ({backend}) c=1:requests_per_s",
                ("one/bare fastapi (ceiling) c=1:requests_per_s",),
            ),
            Row(
                f"bulk enqueue, jobs/s ({backend})",
                f"bulk/{r}:jobs_per_s",
                ("bulk/pgqueuer:jobs_per_s", "bulk/procrastinate:jobs_per_s"),
                target=2.0,
            ),
            Row(
                f"drain, 1 process, jobs/s ({backend})",
                f"drain1/{r}:jobs_per_s",
                ("drain1/pgqueuer:jobs_per_s", "drain1/procrastinate:jobs_per_s"),
                target=2.0,
            ),
            Row(
                f"drain, 2 processes, jobs/s ({backend})",
                f"drain2/{r}:jobs_per_s",
                ("drain2/pgqueuer:jobs_per_s", "drain2/procrastinate:jobs_per_s"),
            ),
            Row(
                f"burst 10,000: lag p99 ms ({backend})",
                f"burst/{r}:lag_p99_ms",
                ("burst/pgqueuer:lag_p99_ms", "burst/procrastinate:lag_p99_ms"),
                higher_is_better=False,
            ),
            Row(
                f"burst 10,000, 2 processes: lag p99 ms ({backend})",
                f"burst2/{r}:lag_p99_ms",
                (),
                higher_is_better=False,
                below=100.0,
            ),
            Row(
                f"steady 500/s: lag p99 ms ({backend})",
                f"steady/{r}:lag_p99_ms",
                ("steady/pgqueuer:lag_p99_ms", "steady/procrastinate:lag_p99_ms"),
                higher_is_better=False,
            ),
            Row(
                f"backlog: bytes per pending job ({backend})",
                f"backlog/{r}:bytes_per_pending_job",
                (),
            ),
            Row(
                f"backlog: due-now drain, jobs/s beside it ({backend})",
                f"backlog/{r}:drain_jobs_per_s_loaded",
                (f"backlog/{r}:drain_jobs_per_s_empty",),
                target=0.9,
            ),
            Row(
                f"backlog: claim of 1,000 ms beside it ({backend})",
                f"backlog/{r}:claim_ms_loaded",
                (f"backlog/{r}:claim_ms_empty",),
                higher_is_better=False,
            ),
            Row(
                f"backlog: prune of 10,000 final jobs, ms ({backend})", f"backlog/{r}:prune_ms", ()
            ),
        ]
    out += [
        Row(
            "HTTP targets, deliveries/s (SQLite)",
            "http:recoup_sqlite",
            ("http:raw_fastest",),
            target=0.5,
        ),
        Row(
            "HTTP targets, deliveries/s (PostgreSQL)",
            "http:recoup_postgresql",
            ("http:raw_fastest",),
            target=0.5,
        ),
        # < 60 s on any of our machines; < 30 s where the demo of issue 21's day took 55 s.
        Row(
            "recoup demo (the first command), s",
            "demo:seconds",
            (),
            higher_is_better=False,
            below=30.0,
        ),
    ]
    return out


def spread(values: list[float], spec: str) -> str:
    if not values:
        return "—"
    med = format(statistics.median(values), spec)
    if len(values) == 1:
        return med
    return f"{med} [{format(min(values), spec)}–{format(max(values), spec)}]"


def print_table(runs: list[dict[str, Metrics]]) -> None:
    print(f"\n{len(runs)} run(s): median [min–max]; ratios taken within each run\n")
    header = f"{'figure':52} {'Recoup':>26}  against (ratio)"
    print(header)
    print("-" * 120)
    for row in rows():
        ours = [v for run in runs if (v := figure(run, row.ours)) is not None]
        if not ours:
            continue
        spec = ",.0f" if max(ours) >= 100 else ",.2f"
        parts = []
        for other in row.against:
            theirs = [v for run in runs if (v := figure(run, other)) is not None]
            ratios = [r for run in runs if (r := row.ratio(run, other)) is not None]
            if not theirs:
                continue
            name = other.split("/")[-1].split(":")[0] if "/" in other else other.split(":")[1]
            parts.append(f"{name} {spread(theirs, spec)} ({spread(ratios, '.2f')}×)")
        verdict = ""
        if row.below is not None:
            met = statistics.median(ours) < row.below
            verdict = f"  target < {row.below:g}: {'met' if met else 'MISSED'}"
        if row.target is not None and row.against:
            ratios = [r for run in runs if (r := row.ratio(run, row.against[0])) is not None]
            if ratios:
                met = statistics.median(ratios) >= row.target
                verdict = f"  target ≥ {row.target:g}×: {'met' if met else 'MISSED'}"
        print(f"{row.label:52} {spread(ours, spec):>26}  {'; '.join(parts)}{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get(
            "RECOUP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, one smoke run")
    parser.add_argument("--backlog", type=int, default=None, help="far-future jobs (10,000,000)")
    parser.add_argument("--backlog-backends", default="postgresql,sqlite", help="comma-separated")
    parser.add_argument(
        "--only", default="", help="comma-separated: enqueue,drains,lags,backlog,http,demo"
    )
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args()
    sizes = Sizes()
    if args.quick:
        sizes = Sizes(
            bulk=10_000,
            drain=10_000,
            drain_procrastinate=1_000,
            burst=2_000,
            steady_seconds=5,
            backlog=200_000,
            http=2_000,
            one_by_one=1_000,
            http_seconds=2,
        )
    if args.backlog is not None:
        sizes = Sizes(**{**sizes.__dict__, "backlog": args.backlog})
    only = set(filter(None, args.only.split(","))) or {
        "enqueue",
        "drains",
        "lags",
        "backlog",
        "http",
        "demo",
    }
    peers_python = ensure_peers_env()
    runs: list[dict[str, Metrics]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(1, (1 if args.quick else args.runs) + 1):
            print(f"run {number}", file=sys.stderr)
            run = Run(args.dsn, sizes, peers_python, Path(tmp))
            if "enqueue" in only:
                run.enqueue_and_api()
            if "drains" in only:
                run.bulk_and_drains()
            if "lags" in only:
                run.lags()
            if "backlog" in only:
                run.backlog(tuple(args.backlog_backends.split(",")))
            if "http" in only:
                run.http_targets()
            if "demo" in only:
                run.first_command()
            runs.append(run.metrics)
            if args.json:
                args.json.write_text(json.dumps(runs, indent=2))
    print_table(runs)


if __name__ == "__main__":
    main()
