"""`recoup worker`: run due jobs from a database until SIGTERM or SIGINT.

Contract:

    recoup worker [--db URL] [--schema NAME] [--concurrency N] [--allow-private-targets]
        [--allow-cidr CIDR ...] [--lease-seconds S] [--grace-seconds S] [--batch-size N]
        [--worker-id ID] [--handlers module:attribute] [--metrics-port N [--metrics-host H]]
        [--log-level debug|info|warning|error] [--log-format text|json] [--processes N]
        [--stop-when-idle]

SIGTERM or SIGINT shuts down gracefully: no new claims, claimed jobs that have not started are
released, running attempts get `--grace-seconds` to finish, every completion is written; exit
0. Private, loopback and link-local targets are refused unless `--allow-private-targets`,
`RECOUP_ALLOW_PRIVATE_TARGETS=1`, or an `--allow-cidr` block covers them. With
`--metrics-port`, Prometheus metrics (jobs by state, due backlog, this worker's firing lag and
attempts by outcome; the names `recoup serve` uses) are served at `http://H:N/metrics`.
Every attempt is logged (`recoup.attempts`: tenant, job id and name, attempt, outcome), a final
failure as a warning; a job whose Python handler this worker lacks is a warning too. Every
option can also be set as `RECOUP_WORKER_<OPTION>` (e.g. `RECOUP_WORKER_CONCURRENCY=20`).

`--stop-when-idle` stops the same graceful way, exit 0, once nothing is running or claimed and
nothing is due (every completion written first, so a retry due at once still runs): a drain
for a cron job, a batch window or CI. Jobs due later are left for the next worker.

`--processes N` (default 1) runs N workers, each in a process of its own on the one store
(`recoup.cli._processes`), each with `--concurrency` attempts at once; SIGTERM or SIGINT stops
them all gracefully. With `--worker-id ID` they are `ID-0` … `ID-(N-1)`; with `--metrics-port
P` (not 0) the i-th serves its metrics on P + i. With `--stop-when-idle` each stops when it
finds nothing left, and the command when all have.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sys
from datetime import timedelta
from typing import Annotated

import typer

from recoup.cli._app import (
    AllowCidrOption,
    AllowPrivateOption,
    DbOption,
    HandlersOption,
    LogFormatOption,
    LogLevelOption,
    SchemaOption,
    app,
    ssrf_guard,
    store_options,
)
from recoup.cli._processes import run_processes
from recoup.cli._tracing import OtelOption, otel_tracing
from recoup.cli._where import LocalOnlyUrlOption
from recoup.errors import InvalidInput, RecoupError
from recoup.jobs.handlers import HandlerRegistry
from recoup.jobs.worker import Worker, WorkerConfig, default_worker_id
from recoup.jobs.worker.collector import settle_collector
from recoup.storage import DEFAULT_DB_URL

RESYNC_SECONDS = 600.0  # how often a worker redoes what the dunning runtime left undone

log = logging.getLogger("recoup.worker")


def load_handlers(spec: str) -> HandlerRegistry:
    """Import `module:attribute` and return the `HandlerRegistry` it names."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidInput(
            "--handlers", spec, "expected module:attribute, e.g. myapp.jobs:registry"
        )
    if os.getcwd() not in sys.path:  # as `python -m` would: the project's own modules
        sys.path.insert(0, os.getcwd())
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise InvalidInput("--handlers", spec, f"cannot import it ({exc})") from None
    if not isinstance(found, HandlerRegistry):
        raise InvalidInput("--handlers", spec, "expected a recoup.jobs.HandlerRegistry")
    return found


@app.command("worker")
def worker_command(
    db: DbOption = DEFAULT_DB_URL,
    schema: SchemaOption = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Attempts run at once.")] = 100,
    allow_private_targets: AllowPrivateOption = False,
    allow_cidr: AllowCidrOption = None,
    lease_seconds: Annotated[float, typer.Option(min=0.1, help="Lease per claimed job.")] = 30.0,
    grace_seconds: Annotated[
        float, typer.Option(min=0.0, help="Time running attempts get to finish on shutdown.")
    ] = 30.0,
    batch_size: Annotated[int, typer.Option(min=1, help="Jobs per claim.")] = 1000,
    worker_id: Annotated[
        str | None, typer.Option(help="This worker's id in leases and logs.")
    ] = None,
    handlers: HandlersOption = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, help="Serve Prometheus metrics on this port (off: unset)."),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(help="Address the metrics port listens on.")
    ] = "127.0.0.1",
    otel: OtelOption = False,
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
    url: LocalOnlyUrlOption = None,
    processes: Annotated[
        int, typer.Option(min=1, help="Worker processes on the store (1: this one).")
    ] = 1,
    stop_when_idle: Annotated[
        bool,
        typer.Option(
            "--stop-when-idle", help="Stop once nothing is due and nothing runs (a drain)."
        ),
    ] = False,
) -> None:
    """Run due jobs until SIGTERM/SIGINT, then shut down gracefully."""
    options = dict(locals())
    if processes > 1:
        from recoup.logs import configure_logging

        configure_logging(log_level, log_format)

        def one(number: int) -> None:
            worker_command(
                **{
                    **options,
                    "processes": 1,
                    "worker_id": None if worker_id is None else f"{worker_id}-{number}",
                    "metrics_port": (metrics_port + number if metrics_port else metrics_port),
                }
            )

        raise typer.Exit(
            run_processes(processes, one, name="recoup-worker", each_until_done=stop_when_idle)
        )
    from recoup.cli._secrets import secret_box, stripe_accounts
    from recoup.jobs.scheduler import Scheduler
    from recoup.jobs.tracing import observing
    from recoup.logs import configure_logging
    from recoup.recovery.runtime import dunning_runtime
    from recoup.storage import open_store
    from recoup.timekeeping.clock import SystemClock

    configure_logging(log_level, log_format)
    guard = ssrf_guard(allow_private_targets, allow_cidr)
    registry = load_handlers(handlers) if handlers else HandlerRegistry()
    store = open_store(db, **store_options(schema, db))
    clock = SystemClock()
    on_attempt = None
    metrics_server = None
    if metrics_port is not None:
        from prometheus_client import start_http_server

        from recoup.jobs.metrics import JobMetrics

        metrics = JobMetrics(
            count_by_state=store.count_by_state,
            due_backlog=lambda: store.due_backlog(clock.now()),
            count_live=store.count_live,
            count_by_tenant=store.count_by_tenant,
        )
        on_attempt = metrics.observe_attempt
        metrics_server, _ = start_http_server(
            metrics_port, addr=metrics_host, registry=metrics.registry
        )
        log.info("metrics on http://%s:%d/metrics", metrics_host, metrics_server.server_port)
    # The dunning runtime's jobs (charge attempts, deadlines) run in every worker.
    # Attempts of invoices charged through Stripe use the tenants' sealed keys.
    box = secret_box(db)
    stripe = stripe_accounts(box)
    scheduler = Scheduler(store, clock=clock, ssrf=guard)
    dunning, registry = dunning_runtime(scheduler, store, registry, stripe=stripe, box=box)
    config = WorkerConfig(
        worker_id=default_worker_id() if worker_id is None else worker_id,
        concurrency=concurrency,
        lease=timedelta(seconds=lease_seconds),
        grace=timedelta(seconds=grace_seconds),
        batch_size=batch_size,
    )
    tracing = otel_tracing(otel)
    worker = Worker(
        store,
        config,
        handlers=registry,
        ssrf=guard,
        clock=clock,
        on_attempt=observing(on_attempt, None if tracing is None else tracing.attempt),
    )

    stopping = asyncio.Event()

    async def resyncing() -> None:
        # Every invoice ends: an attempt whose job was cancelled or failed from outside is
        # reported (`recovery/attempt_ends.py`), here as in the API's maintenance loop.
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), RESYNC_SECONDS)
            if stopping.is_set():
                return
            try:
                await asyncio.to_thread(dunning.resync)
            except RecoupError:
                log.warning("could not resync the dunning runtime", exc_info=True)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.request_stop)
        log.info("worker %s started (concurrency %d, %s)", worker.worker_id, concurrency, guard)
        resync = asyncio.create_task(resyncing())
        try:
            await worker.run(stop_when_idle=stop_when_idle)
        finally:
            stopping.set()  # told, not cancelled: a resync in its thread ends before close
            await resync

    settle_collector()  # this process is the worker's: its collector set for deliveries
    try:
        asyncio.run(main())
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        store.close()
    log.info("worker %s stopped: %s", worker.worker_id, worker.stats)
