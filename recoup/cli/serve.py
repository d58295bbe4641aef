"""`recoup serve`: the HTTP API, and a worker in the same process.

Contract:

    recoup serve [--db URL] [--schema NAME] [--host 127.0.0.1] [--port 8080] [--no-worker]
        [--allow-private-targets] [--allow-cidr CIDR ...] [--max-body-bytes N]
        [--idempotency-hours H] [--concurrency N]

The database defaults to `recoup.db` (SQLite) in the working directory; migrations run at
start. SIGTERM or SIGINT stops the server, then the worker gracefully (see `recoup worker`).
Private, loopback and link-local targets are refused unless `--allow-private-targets`,
`RECOUP_ALLOW_PRIVATE_TARGETS=1`, or an `--allow-cidr` block covers them.
"""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import timedelta
from typing import Annotated, Any

import typer

from recoup.cli._app import app
from recoup.jobs.ssrf import ALLOW_PRIVATE_ENV, SsrfGuard

log = logging.getLogger("recoup.serve")

_TRUE = ("1", "true", "yes", "on")


@app.command("serve")
def serve_command(
    db: Annotated[
        str,
        typer.Option(
            "--db", envvar="RECOUP_DB", help="Database URL (sqlite:///… or postgresql://…)."
        ),
    ] = "sqlite:///recoup.db",
    schema: Annotated[
        str | None, typer.Option(help="PostgreSQL schema holding Recoup's tables.")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8080,
    worker: Annotated[
        bool, typer.Option("--worker/--no-worker", help="Run a worker in this process.")
    ] = True,
    allow_private_targets: Annotated[
        bool,
        typer.Option(help=f"Allow private/loopback targets (or {ALLOW_PRIVATE_ENV}=1)."),
    ] = False,
    allow_cidr: Annotated[
        list[str] | None, typer.Option(help="Allow targets in this CIDR block (repeatable).")
    ] = None,
    max_body_bytes: Annotated[
        int, typer.Option(min=1024, help="Largest request body accepted (bytes).")
    ] = 256 * 1024,
    idempotency_hours: Annotated[
        float, typer.Option(min=1.0, help="How long idempotency keys are kept.")
    ] = 24.0,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Attempts the worker runs at once.")
    ] = 100,
) -> None:
    """Serve the HTTP API (and, unless --no-worker, run due jobs) until SIGTERM/SIGINT."""
    import uvicorn

    from recoup.api.app import ApiSettings, create_app
    from recoup.api.metrics import ApiMetrics, MeteredStore
    from recoup.api.services import open_api_tables
    from recoup.jobs.scheduler import Scheduler
    from recoup.storage import open_store
    from recoup.timekeeping.clock import SystemClock

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    allow_private = allow_private_targets or os.environ.get(ALLOW_PRIVATE_ENV, "").lower() in _TRUE
    guard = SsrfGuard(allow_private=allow_private, allowed_cidrs=allow_cidr or ())
    options: dict[str, Any] = {"schema": schema} if schema else {}
    store = open_store(db, **options)  # migrates
    clock = SystemClock()
    tables = open_api_tables(store)
    metrics = ApiMetrics(
        count_by_state=store.count_by_state, due_backlog=lambda: tables.due_backlog(clock.now())
    )
    # The worker's store reports firing lag and outcomes to the app's /metrics.
    scheduler = Scheduler(MeteredStore(store, metrics), clock=clock, ssrf=guard)
    settings = ApiSettings(
        ssrf=guard,
        max_body_bytes=max_body_bytes,
        idempotency_retention=timedelta(hours=idempotency_hours),
    )
    asgi = create_app(
        store, clock=clock, settings=settings, tables=tables, metrics=metrics, scheduler=scheduler
    )
    server = uvicorn.Server(uvicorn.Config(asgi, host=host, port=port, log_level="info"))
    running = (
        scheduler.running_worker(concurrency=concurrency) if worker else contextlib.nullcontext()
    )
    try:
        with running:
            log.info("serving on http://%s:%d (worker: %s; %s)", host, port, worker, guard)
            server.run()  # returns on SIGTERM/SIGINT; the worker then stops gracefully
    finally:
        store.close()
