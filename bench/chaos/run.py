"""One chaos run on one backend, end to end: a fresh database; the API, two workers and the
billing app as processes; the customers' events and the chaos at once; the drain; the
snapshot and the checks (`run_chaos`).

Retry timing. A policy's gaps are whole days (`{ days = N }` or `{ business_days = N }`,
N ≥ 1) and land in a local window, so no policy puts retries seconds apart; and a test clock
(`recoup serve --clock virtual:…`) runs every job in the server's own process, which would
leave the two worker processes nothing to do and nothing to lose when killed. So the run
reports the demo population's real failures, from October 2026, with the shipped
`business-days` policy: each plan is computed from its failure as in production, and every
attempt is already due when it is reported. Reports are spread over the run, so attempts
start all through the chaos; each invoice's attempts start together, which is harder on the
receiver than attempts days apart (its lock on the invoice and the charge keys are what keep
them to one charge). Attempts that meet a fault (the gateway's outage, a timeout) are asked
again after their job's backoff (a minute at least): those still waiting at the end are open
attempts with a live job, which the checks accept.
"""

from __future__ import annotations

import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.chaos.databases import fresh_database
from bench.chaos.faults import SLOTS, Chaos, ChaosPlan
from bench.chaos.invariants import Check, check_all
from bench.chaos.load import CustomerLoad
from bench.chaos.own_server import OwnServer, own_server
from bench.chaos.processes import Processes
from bench.chaos.rescue import WorkersWatch, rescue_figures
from bench.chaos.snapshot import Snapshot, double_charge_alarms, read_recoup
from recoup.demo.audit import read_ledger
from recoup.demo.billing_side import BillingApp
from recoup.demo.population import generate
from recoup.dunning.policy import preset_text
from recoup.jobs.model import JobState, RunOutcome
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.payments import GatewayClient
from recoup.recovery.service import Dunning
from recoup.storage import Store, open_store
from recoup.tenancy import issue_token, new_tenant

TENANT = "chaos"
POLICY = "business-days"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
START_TIMEOUT = 60.0  # seconds for the workers to register
RESCUE_TIMEOUT = 30.0  # seconds the last kills get to be found dead after the chaos
QUIET = 1.0  # seconds with nothing due and nothing running that count as drained


@dataclass(frozen=True, kw_only=True)
class ChaosOptions:
    backend: str  # sqlite | postgres
    failures: int = 2000  # customers whose renewal fails (a few are paid at once)
    duration: float = 60.0  # seconds of chaos
    seed: int = 7
    drain_timeout: float = 120.0  # seconds the system gets to catch up after the chaos
    kill_every: tuple[float, float] = (2.0, 4.0)
    outage_seconds: float = 3.0
    pg_terminations: int = 2
    postgres_url: str = DEFAULT_POSTGRES_URL
    # PostgreSQL: a server of the run's own instead of `postgres_url`'s, crashed and started
    # again `db_restarts` times mid-run (the machine's shared server is never restarted).
    own_server: bool = False
    db_restarts: int = 1
    log_dir: Path | None = None  # the processes' logs are kept there (default: thrown away)
    keep_database: bool = False  # PostgreSQL: leave the run's database for a look afterwards


@dataclass(frozen=True, kw_only=True)
class ChaosResult:
    options: ChaosOptions
    figures: dict[str, Any]
    checks: list[Check]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks if c.binding)

    def as_json(self) -> dict[str, Any]:
        return {
            "backend": self.options.backend,
            "passed": self.passed,
            "figures": self.figures,
            "checks": [c.as_json() for c in self.checks],
        }


def run_chaos(options: ChaosOptions) -> ChaosResult:
    began = time.monotonic()
    with ExitStack() as stack:
        work = options.log_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        work.mkdir(parents=True, exist_ok=True)
        for left in [*work.glob("*.db*"), *work.glob("*.log")]:
            left.unlink()  # a kept log directory used again: every run starts from nothing
        server: OwnServer | None = None
        postgres_url = options.postgres_url
        if options.own_server:
            if options.backend != "postgres":
                raise ValueError("own_server: only a PostgreSQL run has a server to restart")
            server = stack.enter_context(own_server())
            postgres_url = server.url
        db = stack.enter_context(
            fresh_database(options.backend, work, postgres_url, keep=options.keep_database)
        )
        store = open_store(db.harness_url)  # migrates before any process starts
        stack.callback(store.close)
        return _run(options, store, db, work, began, server)
    raise AssertionError("unreachable")  # ExitStack never swallows here


def _run(
    options: ChaosOptions,
    store: Store,
    db: Any,
    work: Path,
    began: float,
    server: OwnServer | None,
) -> ChaosResult:
    customers = generate(options.seed, options.failures)
    now = datetime.now(UTC)
    tenant = store.ensure_tenant(new_tenant(TENANT, now=now, name="chaos run"))
    token = issue_token(store.api_tables(), TENANT, now=now, label="chaos").secret
    billing_db = work / "billing.db"
    app = BillingApp(
        seed=options.seed,
        size=options.failures,
        db_path=billing_db,
        secret=tenant.signing_secret,
        log_path=work / "billing-app.log",
    )
    db_args = ["--db", db.url]
    plan = ChaosPlan(
        duration=options.duration,
        kill_every=options.kill_every,
        pg_terminations=options.pg_terminations,
        db_restarts=options.db_restarts if server is not None else 0,
        outage_seconds=options.outage_seconds,
    )
    with app, Processes(db_args, work) as procs:
        api_url = procs.start_api()
        billing_url = app.wait_ready()
        charge_path = httpx.get(billing_url, timeout=10).json()["charge_path"]
        dunning = Dunning(Scheduler(store, ssrf=SsrfGuard(allow_private=True)), store)
        dunning.configure(
            TENANT, policy_toml=preset_text(POLICY), charge_url=billing_url + charge_path
        )
        watch = WorkersWatch(store.workers)
        watch.start()
        try:
            watch.wait_registered([procs.start_worker(slot) for slot in SLOTS], START_TIMEOUT)
            chaos = Chaos(
                plan,
                processes=procs,
                database=db,
                billing_url=billing_url,
                seed=options.seed,
                is_registered=watch.registered,
                server=server,
            )
            load = CustomerLoad(
                customers,
                api_url=api_url,
                token=token,
                billing_url=billing_url,
                spread=options.duration * 0.8,
                seed=options.seed,
            )
            started = time.monotonic()
            chaos.start()
            load.start()
            try:
                loaded = load.join()
                time.sleep(max(0.0, started + options.duration - time.monotonic()))
            except BaseException:
                load.abort()
                raise
            finally:
                chaos.stop()
            chaos_seconds = time.monotonic() - started
            # A worker killed in the last seconds is found dead a few seconds later (PostgreSQL:
            # ~3 s): the live workers get that long before they stop.
            watch.wait_rescued([k.worker_id for k in chaos.log.kills], RESCUE_TIMEOUT)
            drained, drain_seconds = _drain(store, options.drain_timeout)
            time.sleep(0.5)  # the watch's last looks
        finally:
            watch.stop()
        # Nothing may move while the two sides are read: a job whose backoff ends between
        # reading the invoices and the jobs, or the gateway and the ledger, would make them
        # disagree. The workers stop gracefully first (what they hold is finished or given
        # back); the billing app stops before its ledger is read.
        procs.stop_workers()
        with GatewayClient(f"{billing_url}/gateway") as gateway:
            gateway_stats = gateway.stats()
        invoices, jobs, runs = read_recoup(store, TENANT)
        workers = [w.id for w in store.workers()]
        alarms = double_charge_alarms(store, TENANT, invoices)
        at_end = datetime.now(UTC)
    ledger = read_ledger(billing_db)
    snap = Snapshot(
        now=at_end,
        invoices=invoices,
        jobs=jobs,
        runs=runs,
        gateway=gateway_stats,
        ledger=ledger,
        workers=workers,
        double_charge_alarms=alarms,
    )
    log = chaos.log
    killed = [k.worker_id for k in log.kills]
    lost = [r for rs in runs.values() for r in rs if r.outcome is RunOutcome.LOST]
    rescue = rescue_figures(log.kills, watch, lost)
    checks = check_all(
        snap,
        paid_out_of_band=loaded.paid_out_of_band,
        killed=killed,
        rescued=watch.gone_at,
        drained=drained,
        undelivered=loaded.errors,
    )
    checks.append(_chaos_ran(options, log, plan))
    figures = {
        "backend": options.backend,
        "database": db.url if options.keep_database else None,
        "failures_generated": len(customers),
        "failures_reported": len(loaded.reported),
        "customer_events": dict(sorted(loaded.counts.items())),
        "chaos_seconds": round(chaos_seconds, 1),
        "drain_seconds": round(drain_seconds, 1),
        "total_seconds": round(time.monotonic() - began, 1),
        "invoices_by_state": _count(str(i.state) for i in invoices),
        "attempts_by_state": _count(str(a.state) for i in invoices for a in i.attempts),
        "jobs_by_state": _count(str(j.state) for j in jobs.values()),
        "runs_by_outcome": _count(str(r.outcome) for rs in runs.values() for r in rs),
        "gateway": {k: v for k, v in gateway_stats.items() if k != "charges_per_key"},
        "rescue": rescue.as_json(),
        "watch_last_error": watch.last_error,
        "workers_seen": sorted(watch.seen_first),
        "pg_terminations": [
            {"at": t.at.isoformat(), "connections": t.connections} for t in log.terminations
        ],
        "db_restarts_s": [round(s, 1) for s in log.db_restarts],
        "gateway_outages_s": [
            round((end - start).total_seconds(), 1) for start, end in log.outages
        ],
        "still_open_attempts": sum(1 for i in invoices for a in i.attempts if a.state.is_open),
        "running_jobs_at_end": sum(1 for j in jobs.values() if j.state is JobState.RUNNING),
    }
    return ChaosResult(options=options, figures=figures, checks=checks)


def _drain(store: Store, timeout: float) -> tuple[bool, float]:
    """Wait until nothing is due and nothing runs for `QUIET` seconds → (drained, seconds)."""
    began = time.monotonic()
    quiet_since: float | None = None
    while time.monotonic() - began < timeout:
        try:
            busy = store.due_backlog(datetime.now(UTC)) + store.count_live()[JobState.RUNNING]
        except Exception:  # a connection the chaos terminated: look again
            busy = 1
        now = time.monotonic()
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= QUIET:
            return True, now - began
        time.sleep(0.1)
    return False, time.monotonic() - began


def _chaos_ran(options: ChaosOptions, log: Any, plan: ChaosPlan) -> Check:
    """The chaos happened as planned: workers killed, connections terminated (PostgreSQL),
    the gateway down for its window, no step of it failing."""
    offenders = list(log.errors)
    if not log.kills:
        offenders.append("no worker was killed")
    if options.backend == "postgres" and len(log.terminations) < plan.pg_terminations:
        offenders.append(
            f"{len(log.terminations)} connection terminations, planned {plan.pg_terminations}"
        )
    if len(log.db_restarts) < plan.db_restarts:
        offenders.append(f"{len(log.db_restarts)} database restarts, planned {plan.db_restarts}")
    if plan.outage_seconds > 0 and not log.outages:
        offenders.append("the gateway outage did not happen")
    return Check(
        name="the chaos ran as planned",
        figure=f"{len(log.kills)} kills, {len(log.terminations)} terminations, "
        f"{len(log.db_restarts)} database restarts, {len(log.outages)} outages",
        offenders=offenders,
    )


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return dict(sorted(counts.items()))


__all__ = ["ChaosOptions", "ChaosResult", "run_chaos"]
