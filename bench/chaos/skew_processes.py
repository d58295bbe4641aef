"""Clock skew with libfaketime (issue 24), on PostgreSQL: three `recoup worker` processes share
one fresh database, one on the machine's clock, one whose whole process reads it `--skew`
minutes ahead and one as far behind (Debian's libfaketime preloaded, `FAKETIME="+5m"`; the
monotonic clock left true, as a wrong wall clock leaves it). They deliver HTTP jobs to a
receiver in this process, which records each request's arrival by the true clock: short jobs
due over the next few seconds, long ones the receiver answers after three leases, and the
jobs of a claimer that stalls (as in `clock_skew`). The checks and figures are
`clock_skew`'s.

SQLite is not run this way: libfaketime fakes the machine's clock for the whole process, the
store's reading of it included, and on SQLite the machine's clock is the only one there is
(ARCHITECTURE.md, 'Clock skew'). Without libfaketime the run says so and does nothing.

    python -m bench.chaos.skew_processes [--jobs 200] [--skew 5] [--dsn postgresql://…]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import BinaryIO

from bench.chaos.clock_skew import TENANT, Recorder, SkewFigures, Start, check_figures, stall_claims
from bench.chaos.databases import fresh_database
from bench.chaos.processes import ROOT
from bench.chaos.run import DEFAULT_POSTGRES_URL
from recoup.jobs.model import HttpTarget, JobState, NewJob, Tenant
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.storage import Store, open_store

# Where Debian's `faketime` puts it, for the machine's architecture (None: not installed).
LIBFAKETIME = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))), None)
LEASE_SECONDS = 1.5
SPREAD = 4.0  # seconds over which the short jobs fall due
START_TIMEOUT = 30.0
# The stalled claimer's lease: longer than the workers take to start (a few seconds on a busy
# machine), so that its expiry, not their start, is what the recovery is measured from.
STALLED_LEASE = timedelta(seconds=10)


class NoFaketime(Exception):
    """libfaketime is not installed here (Debian: `apt-get install faketime`)."""


class Receiver:
    """A loopback HTTP endpoint: records each delivery (job id, attempt, arrival by the true
    clock); `/long` answers after three leases, anything else at once."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.run_at: dict[str, datetime] = {}  # job id → the instant it may start at
        recorder, run_at = self.recorder, self.run_at

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                arrived = datetime.now(UTC)
                job_id = self.headers.get("Recoup-Job-Id", "")
                attempt = int(self.headers.get("Recoup-Attempt", "0"))
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                at = run_at.get(job_id, arrived)
                with recorder.lock:
                    recorder.starts.append(Start(job_id, attempt, "?", arrived, at))
                if self.path == "/long":
                    time.sleep(3 * LEASE_SECONDS)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def workers(url: str, offsets: dict[str, float], logs: Path) -> Iterator[None]:
    """`recoup worker` processes, each under `FAKETIME` of its offset (minutes), stopped with
    SIGTERM at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    logs_open: list[BinaryIO] = []
    try:
        for name, minutes in offsets.items():
            env = dict(os.environ)
            if minutes:
                env.update(
                    LD_PRELOAD=str(LIBFAKETIME),
                    FAKETIME=f"{minutes:+g}m",
                    FAKETIME_DONT_FAKE_MONOTONIC="1",
                )
            args = ["worker", "--db", url, "--worker-id", name, "--allow-private-targets"]
            args += ["--lease-seconds", str(LEASE_SECONDS), "--grace-seconds", "5"]
            log = (logs / f"{name}.log").open("wb")
            logs_open.append(log)
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "recoup", *args],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for opened in logs_open:
            opened.close()


def run_skew_processes(
    *,
    jobs: int = 200,
    long: int = 4,
    stalled: int = 6,
    skew_minutes: float = 5.0,
    postgres_url: str = DEFAULT_POSTGRES_URL,
    seed: int = 7,
) -> SkewFigures:
    if LIBFAKETIME is None:
        raise NoFaketime("libfaketime is not installed (Debian: apt-get install faketime)")
    began = time.monotonic()
    figures = SkewFigures(backend="postgres (libfaketime)", skew_minutes=skew_minutes)
    offsets = {"true": 0.0, "ahead": skew_minutes, "behind": -skew_minutes}
    figures.workers = {name: minutes * 60 for name, minutes in offsets.items()}
    rng = random.Random(seed)
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="recoup-skew-")))
        database = stack.enter_context(fresh_database("postgres", work, postgres_url))
        store: Store = open_store(database.harness_url)
        stack.callback(store.close)
        store.ensure_tenant(
            Tenant(id=TENANT, name="Default", signing_secret="s" * 32, created_at=_now())
        )
        receiver = Receiver()
        stack.callback(receiver.close)
        short_target = HttpTarget(url=f"{receiver.url}/short")
        frozen = [NewJob(run_at=_now(), target=short_target) for _ in range(stalled)]
        expiries = {
            job_id: job.lease_expires_at
            for job_id in stall_claims(store, frozen, lease=STALLED_LEASE)
            if (job := store.get(TENANT, job_id)) is not None
        }
        for job_id, expiry in expiries.items():
            if expiry is not None:  # a stalled job may run again once its lease expired
                receiver.run_at[job_id] = expiry
        logs = work / "logs"
        logs.mkdir()
        with workers(database.url, offsets, logs):
            _wait_registered(store, set(offsets))
            real = _now()
            short = [
                NewJob(
                    run_at=real + timedelta(seconds=0.3 + rng.random() * SPREAD),
                    target=short_target,
                )
                for _ in range(jobs)
            ]
            held = [NewJob(run_at=real, target=HttpTarget(url=f"{receiver.url}/long"))]
            held = held + [NewJob(run_at=real, target=held[0].target) for _ in range(long - 1)]
            receiver.run_at.update({job.id: job.run_at for job in short + held})
            Scheduler(store, ssrf=SsrfGuard(allow_private=True)).enqueue_many(short + held)
            enqueued = time.monotonic()
            expected = jobs + long + stalled
            deadline = time.monotonic() + SPREAD + 60
            while time.monotonic() < deadline:
                if store.count_by_state(TENANT).get(JobState.SUCCEEDED, 0) >= expected:
                    break
                time.sleep(0.05)
            figures.drain_s = round(time.monotonic() - enqueued, 2)
            skews = {name: _logged_skew(logs / f"{name}.log") for name in offsets}
        check_figures(figures, store, receiver.recorder, expiries, expected, {j.id for j in short})
        figures.starts_by_worker = _runs_by_worker(store, [j.id for j in short + held])
        figures.workers = {name: skews[name] or 0.0 for name in offsets}
    figures.seconds = round(time.monotonic() - began, 2)
    return figures


def _wait_registered(store: Store, names: set[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if names <= {worker.id for worker in store.workers()}:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the workers {sorted(names)} did not register in {START_TIMEOUT:g} s")


def _logged_skew(log: Path) -> float | None:
    """The skew a worker logged, in seconds (positive: its clock ahead), if it did."""
    for line in log.read_text("utf-8", "replace").splitlines():
        if "this machine's clock is" in line:
            words = line.split("this machine's clock is ", 1)[1].split()
            seconds = float(words[0])
            return seconds if words[2] == "ahead" else -seconds
    return None


def _runs_by_worker(store: Store, job_ids: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for job_id in job_ids:
        for run in store.runs(TENANT, job_id):
            worker = run.worker_id or "?"
            counts[worker] = counts.get(worker, 0) + 1
    return counts


def _now() -> datetime:
    return datetime.now(UTC)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chaos.skew_processes", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--jobs", type=int, default=200, help="short jobs")
    parser.add_argument("--skew", type=float, default=5.0, help="minutes ahead and behind")
    parser.add_argument("--dsn", default=DEFAULT_POSTGRES_URL)
    args = parser.parse_args(argv)
    try:
        figures = run_skew_processes(jobs=args.jobs, skew_minutes=args.skew, postgres_url=args.dsn)
    except NoFaketime as exc:
        print(f"clock skew with libfaketime: not run ({exc})")
        return 0
    print(json.dumps({**asdict(figures), "passed": figures.passed}, indent=2))
    return 0 if figures.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
