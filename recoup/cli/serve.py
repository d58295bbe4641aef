"""`recoup serve`: the HTTP API, and a worker in the same process.

Contract:

    recoup serve [--db URL] [--schema NAME] [--host 127.0.0.1] [--port 8080] [--no-worker]
        [--allow-private-targets] [--allow-cidr CIDR ...] [--max-body-bytes N]
        [--idempotency-hours H] [--concurrency N] [--clock virtual:2026-12-01T00:00:00Z]
        [--rate-limit N/s|N/min|N/h|off] [--handlers module:attribute] [--metrics-token T]
        [--log-level debug|info|warning|error] [--log-format text|json] [--processes N]

The database defaults to `recoup.db` (SQLite) in the working directory; migrations run at
start. SIGTERM or SIGINT stops the server, then the worker gracefully (see `recoup worker`).
Private, loopback and link-local targets are refused unless `--allow-private-targets`,
`RECOUP_ALLOW_PRIVATE_TARGETS=1`, or an `--allow-cidr` block covers them.

`--rate-limit 50/s` (or `RECOUP_RATE_LIMIT=50/s`) limits each tenant's requests in this
process (a token bucket holding one unit's worth): past it, 429 with `Retry-After`. Off by
default.

`--clock virtual:INSTANT` runs the whole server on a test clock starting at INSTANT: nothing
runs until `POST /v1/clock` moves it (`{"advance_seconds": N}` or `{"to": INSTANT}`), which
answers once every job due up to then has run, in due order. Without it, /v1/clock is a 404.

`/metrics` wants `Authorization: Bearer T` with `--metrics-token T` (or `RECOUP_METRICS_TOKEN`);
without a token it answers loopback clients only.

`--handlers myapp.jobs:registry` gives the in-process worker your Python handlers (as `recoup
worker --handlers`). Logs: see `recoup worker`; uvicorn's own lines go through the same format.
Every option can also be set as `RECOUP_SERVE_<OPTION>` (e.g. `RECOUP_SERVE_PORT=9000`).

`--processes N` (default 1) serves the port from N processes, each with its own worker unless
`--no-worker`, on the one store (`SO_REUSEPORT`: the kernel spreads connections over them);
SIGTERM or SIGINT stops them all gracefully (`recoup.cli._processes`). A test clock
(`--clock`) lives in one process: it takes `--processes 1`. The rate limit is per process.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator
from datetime import datetime, timedelta
from types import FrameType
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
from recoup.cli._processes import reserve_port, run_processes, shared_listener
from recoup.cli._tracing import OtelOption, otel_tracing
from recoup.cli._where import LocalOnlyUrlOption
from recoup.errors import InvalidInput
from recoup.storage import DEFAULT_DB_URL
from recoup.timekeeping.clock import VirtualClock

log = logging.getLogger("recoup.serve")

# Set in each process of `--processes N`: it listens on the port its parent reserved.
_shares_port = False


@app.command("serve")
def serve_command(
    db: DbOption = DEFAULT_DB_URL,
    schema: SchemaOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8080,
    worker: Annotated[
        bool, typer.Option("--worker/--no-worker", help="Run a worker in this process.")
    ] = True,
    allow_private_targets: AllowPrivateOption = False,
    allow_cidr: AllowCidrOption = None,
    max_body_bytes: Annotated[
        int, typer.Option(min=1024, help="Largest request body accepted (bytes).")
    ] = 256 * 1024,
    idempotency_hours: Annotated[
        float, typer.Option(min=1.0, help="How long idempotency keys are kept.")
    ] = 24.0,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Attempts the worker runs at once.")
    ] = 100,
    clock_spec: Annotated[
        str | None,
        typer.Option(
            "--clock",
            help="virtual:2026-12-01T00:00:00Z runs on a test clock moved by POST /v1/clock.",
        ),
    ] = None,
    rate_limit: Annotated[
        str,
        typer.Option(
            envvar="RECOUP_RATE_LIMIT",
            help="Requests per tenant: N/s, N/min or N/h (429 with Retry-After past it), or off.",
        ),
    ] = "off",
    handlers: HandlersOption = None,
    metrics_token: Annotated[
        str | None,
        typer.Option(
            envvar="RECOUP_METRICS_TOKEN",
            help="/metrics wants this bearer token (unset: loopback clients only).",
        ),
    ] = None,
    otel: OtelOption = False,
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
    url: LocalOnlyUrlOption = None,
    processes: Annotated[
        int,
        typer.Option(min=1, help="Processes serving the port and the store (1: this one)."),
    ] = 1,
) -> None:
    """Serve the HTTP API (and, unless --no-worker, run due jobs) until SIGTERM/SIGINT."""
    options = dict(locals())
    if processes > 1:
        if clock_spec is not None:
            raise InvalidInput("--processes", processes, "1 with --clock (one test clock)")
        configure_logging_early(log_level, log_format)
        reserved = reserve_port(host, port)
        options["port"] = reserved.getsockname()[1]
        options["processes"] = 1

        def one(number: int) -> None:
            global _shares_port
            _shares_port = True
            serve_command(**options)

        try:
            code = run_processes(processes, one, name="recoup-serve")
        finally:
            reserved.close()
        raise typer.Exit(code)
    import uvicorn

    from recoup.api.app import ApiSettings, create_app
    from recoup.api.http_protocols import protocol_class
    from recoup.api.metrics import ApiMetrics
    from recoup.api.rate_limits import RateLimit
    from recoup.cli._secrets import secret_box, stripe_accounts
    from recoup.cli.worker import load_handlers
    from recoup.jobs.scheduler import Scheduler
    from recoup.jobs.time_travel import TestClock
    from recoup.jobs.tracing import observing
    from recoup.logs import configure_logging
    from recoup.recovery.runtime import dunning_runtime
    from recoup.storage import open_api_tables, open_store
    from recoup.timekeeping.clock import Clock, SystemClock

    configure_logging(log_level, log_format)
    tracing = otel_tracing(otel)
    registry = load_handlers(handlers) if handlers else None
    guard = ssrf_guard(allow_private_targets, allow_cidr)
    limit = RateLimit.parse(rate_limit)
    virtual = parse_clock(clock_spec) if clock_spec is not None else None
    store = open_store(db, **store_options(schema, db))  # migrates
    clock: Clock = virtual or SystemClock()
    tables = open_api_tables(store)
    metrics = ApiMetrics(
        count_by_state=store.count_by_state,
        due_backlog=lambda: store.due_backlog(clock.now()),
        count_live=store.count_live,
        count_by_tenant=store.count_by_tenant,
    )
    scheduler = Scheduler(store, clock=clock, ssrf=guard)
    settings = ApiSettings(
        ssrf=guard,
        max_body_bytes=max_body_bytes,
        idempotency_retention=timedelta(hours=idempotency_hours),
        rate_limit=limit,
        metrics_token=metrics_token or None,
    )
    box = secret_box(db)
    accounts = stripe_accounts(box)  # one set of Stripe clients: attempts and intake
    dunning, registry = dunning_runtime(scheduler, store, registry, stripe=accounts, box=box)
    test_clock = None
    if virtual is not None:
        test_clock = TestClock(
            virtual,
            scheduler.worker(handlers=registry, concurrency=concurrency),
            store,
            schedules=store,
            before_step=dunning.resync,
        )
    asgi = create_app(
        store,
        clock=clock,
        settings=settings,
        tables=tables,
        metrics=metrics,
        scheduler=scheduler,
        dunning=dunning,
        test_clock=test_clock,
        secret_box=box,
        stripe_accounts=accounts,
        tracing=tracing,
    )
    # log_config=None: uvicorn's loggers go through ours (one format, one level).
    # http=: a request uvicorn's parser refuses is answered in problem+json too.
    config = uvicorn.Config(
        asgi,
        host=host,
        port=port,
        log_config=None,
        log_level=log_level.lower(),
        http=protocol_class(),
    )
    server = uvicorn.Server(config)
    # The worker reports each attempt's firing lag and outcome to the app's /metrics.
    # On a test clock, jobs run only when the clock is moved (POST /v1/clock).
    running = (
        scheduler.running_worker(
            handlers=registry,
            concurrency=concurrency,
            on_attempt=observing(
                metrics.observe_attempt, None if tracing is None else tracing.attempt
            ),
        )
        if worker and virtual is None
        else contextlib.nullcontext()
    )
    try:
        with running:
            log.info(
                "serving on http://%s:%d (worker: %s; clock: %s; %s; rate limit: %s)",
                host,
                port,
                worker,
                clock_spec or "system",
                guard,
                rate_limit,
            )
            # Returns on SIGTERM/SIGINT; the worker then stops gracefully.
            with _signals_told_once():
                server.run(sockets=[shared_listener(host, port)] if _shares_port else None)
    finally:
        store.close()


@contextlib.contextmanager
def _signals_told_once() -> Iterator[None]:
    """While the server runs: uvicorn stops on SIGTERM/SIGINT, then raises the signal again
    under the handler it found, which by default would kill the process before the worker's
    graceful stop (or raise KeyboardInterrupt). The signal has been answered by then: here
    the repeat is a no-op, and the command goes on to stop the worker and exit 0."""
    previous = {sig: signal.signal(sig, _told) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _told(signum: int, frame: FrameType | None) -> None:
    log.info("stopping (signal %d)", signum)


def configure_logging_early(level: str, log_format: str) -> None:
    """The parent of `--processes` logs its own lines (processes started, one exited)."""
    from recoup.logs import configure_logging

    configure_logging(level, log_format)


def parse_clock(spec: str) -> VirtualClock:
    """`virtual:INSTANT` → a virtual clock at that instant; anything else → `InvalidInput`
    naming `--clock`."""
    allowed = "expected virtual:INSTANT, e.g. virtual:2026-12-01T00:00:00Z"
    kind, _, start = spec.partition(":")
    if kind != "virtual" or not start:
        raise InvalidInput("--clock", spec, allowed)
    try:
        instant = datetime.fromisoformat(start)
    except ValueError:
        raise InvalidInput("--clock", spec, allowed) from None
    if instant.tzinfo is None:
        raise InvalidInput("--clock", spec, f"{allowed} (with a UTC offset or Z)")
    return VirtualClock(instant)
