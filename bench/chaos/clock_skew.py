"""Clock skew (issue 24): three workers share one fresh database, one on the true clock, one
whose clock runs `--skew` minutes ahead and one as far behind (injected: an `OffsetClock` over
the system clock, so the process reads one kernel clock, as every process on a SQLite file
must). They run short jobs due over the next few seconds, long jobs held for three leases, and
the jobs of a claimer that stalls (claimed through the store under a short lease, never
heartbeat, never finished: a worker frozen without its session ending).

Checked by machine, per backend: every job succeeded (none lost); every attempt started once
and every job once, but the stalled ones, once more after their lease (none doubled); no start
before the job's instant by the real clock (the worst margin is reported); no stalled lease
taken back before it expired by the database's clock, and the time from its expiry to its job
running again (the recovery); how late the short jobs started.

    python -m bench.chaos.clock_skew [--backend sqlite|postgres|all] [--jobs 300]
        [--long 6] [--stalled 6] [--skew 5] [--dsn postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.chaos.databases import fresh_database
from bench.chaos.run import DEFAULT_POSTGRES_URL
from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import JobState, NewJob, PythonTarget, RunOutcome, Tenant
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import ClaimParams
from recoup.storage import Store, open_store
from recoup.timekeeping.clock import OffsetClock, SystemClock

LEASE = timedelta(seconds=1.5)
STALLED_LEASE = timedelta(seconds=2)  # from before the workers start: it expires while they run
WORKER_OPTIONS: dict[str, Any] = {
    "lease": LEASE,
    "rescue_interval": timedelta(seconds=0.1),
    "session_beat": timedelta(seconds=0.1),
    "dead_check_interval": timedelta(seconds=0.05),
}
SPREAD = 4.0  # seconds over which the short jobs fall due
TENANT = "default"


@dataclass
class SkewFigures:
    backend: str
    skew_minutes: float
    workers: dict[str, float] = field(default_factory=dict)  # name → its clock's offset, s
    jobs: int = 0
    succeeded: int = 0
    lost: int = 0  # not succeeded at the end
    doubled: int = 0  # an attempt started twice, or a job more often than it should
    early: int = 0  # starts before the job's instant by the real clock
    worst_margin_ms: float = 0.0  # the least (start − instant) of any start, in ms
    late_p50_ms: float = 0.0  # short jobs: start − instant
    late_max_ms: float = 0.0
    starts_by_worker: dict[str, int] = field(default_factory=dict)
    stalled: int = 0
    taken_early: int = 0  # stalled leases taken back before their expiry
    recovery_s: list[float] = field(default_factory=list)  # stalled lease expiry → restart
    drain_s: float = 0.0  # from the jobs' enqueue to the last one succeeded
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return (
            self.lost == 0
            and self.doubled == 0
            and self.early == 0
            and self.taken_early == 0
            and len(self.recovery_s) == self.stalled
            and self.succeeded == self.jobs
        )


@dataclass(frozen=True)
class Start:
    job_id: str
    attempt: int
    worker: str
    at: datetime  # by the real clock
    run_at: datetime


class Recorder:
    """Every attempt's start, from the handlers of every worker."""

    def __init__(self) -> None:
        self.starts: list[Start] = []
        self.lock = threading.Lock()

    def add(self, ctx: HandlerContext, worker: str) -> None:
        start = Start(ctx.job_id, ctx.attempt, worker, datetime.now(UTC), ctx.run_at)
        with self.lock:
            self.starts.append(start)

    def handlers(self, worker: str) -> HandlerRegistry:
        registry = HandlerRegistry()
        registry.add("short", lambda ctx: self.add(ctx, worker), inline=True)

        async def long(ctx: HandlerContext) -> None:
            self.add(ctx, worker)
            await asyncio.sleep(3 * LEASE.total_seconds())

        registry.add("long", long)
        return registry


def run_skew(
    backend: str,
    *,
    jobs: int = 300,
    long: int = 6,
    stalled: int = 6,
    skew: timedelta = timedelta(minutes=5),
    postgres_url: str = DEFAULT_POSTGRES_URL,
    seed: int = 7,
) -> SkewFigures:
    began = time.monotonic()
    figures = SkewFigures(backend=backend, skew_minutes=skew.total_seconds() / 60)
    offsets = {"true": timedelta(0), "ahead": skew, "behind": -skew}
    figures.workers = {name: offset.total_seconds() for name, offset in offsets.items()}
    recorder = Recorder()
    rng = random.Random(seed)
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="recoup-skew-")))
        database = stack.enter_context(fresh_database(backend, work, postgres_url))
        store: Store = open_store(database.url)
        stack.callback(store.close)
        store.ensure_tenant(
            Tenant(id=TENANT, name="Default", signing_secret="s" * 32, created_at=_now())
        )
        guard = SsrfGuard(allow_private=True)
        true = Scheduler(store, ssrf=guard)
        # The stalled claimer takes its jobs before the workers start, under a short lease,
        # and then does nothing.
        frozen = [
            NewJob(run_at=_now(), target=PythonTarget(handler="short")) for _ in range(stalled)
        ]
        expiries = {
            job_id: job.lease_expires_at
            for job_id in stall_claims(store, frozen)
            if (job := store.get(TENANT, job_id)) is not None
        }
        with _workers(store, offsets, recorder, guard):
            real = _now()
            short = [
                NewJob(
                    run_at=real + timedelta(seconds=0.3 + rng.random() * SPREAD),
                    target=PythonTarget(handler="short"),
                )
                for _ in range(jobs)
            ]
            held = [NewJob(run_at=real, target=PythonTarget(handler="long")) for _ in range(long)]
            true.enqueue_many(short + held)
            enqueued = time.monotonic()
            expected = jobs + long + stalled
            deadline = time.monotonic() + SPREAD + 30
            while time.monotonic() < deadline:
                done = store.count_by_state(TENANT).get(JobState.SUCCEEDED, 0)
                if done >= expected:
                    break
                time.sleep(0.05)
            figures.drain_s = round(time.monotonic() - enqueued, 2)
        check_figures(figures, store, recorder, expiries, expected, {job.id for job in short})
    figures.seconds = round(time.monotonic() - began, 2)
    return figures


@contextlib.contextmanager
def _workers(
    store: Store, offsets: dict[str, timedelta], recorder: Recorder, guard: SsrfGuard
) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for name, offset in offsets.items():
            scheduler = Scheduler(store, clock=OffsetClock(SystemClock(), offset), ssrf=guard)
            stack.enter_context(
                scheduler.running_worker(
                    handlers=recorder.handlers(name), worker_id=name, **WORKER_OPTIONS
                )
            )
        yield


def stall_claims(
    store: Store, jobs: list[NewJob], *, lease: timedelta = STALLED_LEASE
) -> list[str]:
    """Insert `jobs` and claim them as the stalled claimer, one at a time 37 ms apart, so that
    their leases expire at instants of their own (each recovery its own sample)."""
    ids = [store.insert(job, now=_now()).id for job in jobs]
    claimed: list[str] = []
    for _ in ids:
        params = ClaimParams(
            worker_id="stalled",
            now=_now(),
            horizon=timedelta(0),
            lease=lease,
            limit=1,
            store_clock=True,
        )
        claimed += [job.id for job in store.claim_due(params)]
        time.sleep(0.037)
    return claimed


def check_figures(
    figures: SkewFigures,
    store: Store,
    recorder: Recorder,
    expiries: dict[str, datetime | None],
    expected: int,
    short_ids: set[str],
) -> None:
    starts = recorder.starts
    figures.jobs = expected
    figures.stalled = len(expiries)
    figures.succeeded = store.count_by_state(TENANT).get(JobState.SUCCEEDED, 0)
    figures.lost = expected - figures.succeeded
    by_attempt: dict[tuple[str, int], int] = {}
    by_job: dict[str, int] = {}
    for start in starts:
        by_attempt[(start.job_id, start.attempt)] = (
            by_attempt.get((start.job_id, start.attempt), 0) + 1
        )
        by_job[start.job_id] = by_job.get(start.job_id, 0) + 1
        figures.starts_by_worker[start.worker] = figures.starts_by_worker.get(start.worker, 0) + 1
    figures.doubled = sum(1 for n in by_attempt.values() if n > 1) + sum(
        1 for n in by_job.values() if n > 1
    )
    margins = [(s.at - s.run_at).total_seconds() * 1000 for s in starts]
    figures.early = sum(1 for m in margins if m < 0)
    figures.worst_margin_ms = round(min(margins, default=0.0), 3)
    short = sorted(
        (s.at - s.run_at).total_seconds() * 1000 for s in starts if s.job_id in short_ids
    )
    if short:
        figures.late_p50_ms = round(short[len(short) // 2], 2)
        figures.late_max_ms = round(short[-1], 2)
    for job_id, expiry in expiries.items():
        runs = store.runs(TENANT, job_id)
        lost = [r for r in runs if r.outcome is RunOutcome.LOST]
        again = [s for s in starts if s.job_id == job_id]
        if expiry is None or not lost or not again:
            continue
        if lost[0].finished_at < expiry:
            figures.taken_early += 1
        figures.recovery_s.append(round((again[0].at - expiry).total_seconds(), 3))
    figures.recovery_s.sort()


def _now() -> datetime:
    return datetime.now(UTC)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chaos.clock_skew", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--backend", action="append", choices=["postgres", "sqlite", "all"])
    parser.add_argument("--jobs", type=int, default=300, help="short jobs")
    parser.add_argument("--long", type=int, default=6, help="jobs held for three leases")
    parser.add_argument("--stalled", type=int, default=6, help="jobs of the stalled claimer")
    parser.add_argument("--skew", type=float, default=5.0, help="minutes ahead and behind")
    parser.add_argument("--dsn", default=DEFAULT_POSTGRES_URL)
    args = parser.parse_args(argv)
    backends = args.backend or ["sqlite"]
    if "all" in backends:
        backends = ["sqlite", "postgres"]
    logging.getLogger("recoup").setLevel(logging.ERROR)
    results = [
        run_skew(
            backend,
            jobs=args.jobs,
            long=args.long,
            stalled=args.stalled,
            skew=timedelta(minutes=args.skew),
            postgres_url=args.dsn,
        )
        for backend in backends
    ]
    for figures in results:
        print(json.dumps({**asdict(figures), "passed": figures.passed}, indent=2))
    return 0 if all(figures.passed for figures in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
