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
from datetime import timedelta
from typing import Annotated

import typer

from recoup.cli._app import (
    AllowCidrOption,
    AllowPrivateOption,
    DbOption,
    SchemaOption,
    app,
    ssrf_guard,
    store_options,
)
from recoup.storage import DEFAULT_DB_URL

log = logging.getLogger("recoup.serve")


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
) -> None:
    """Serve the HTTP API (and, unless --no-worker, run due jobs) until SIGTERM/SIGINT."""
    import uvicorn

    from recoup.api.app import ApiSettings, create_app
    from recoup.api.metrics import ApiMetrics
    from recoup.api.services import open_api_tables
    from recoup.jobs.scheduler import Scheduler
    from recoup.storage import open_store
    from recoup.timekeeping.clock import SystemClock

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    guard = ssrf_guard(allow_private_targets, allow_cidr)
    store = open_store(db, **store_options(schema, db))  # migrates
    clock = SystemClock()
    tables = open_api_tables(store)
    metrics = ApiMetrics(
        count_by_state=store.count_by_state,
        due_backlog=lambda: store.due_backlog(clock.now()),
        count_live=store.count_live,
    )
    scheduler = Scheduler(store, clock=clock, ssrf=guard)
    settings = ApiSettings(
        ssrf=guard,
        max_body_bytes=max_body_bytes,
        idempotency_retention=timedelta(hours=idempotency_hours),
    )
    asgi = create_app(
        store, clock=clock, settings=settings, tables=tables, metrics=metrics, scheduler=scheduler
    )
    server = uvicorn.Server(uvicorn.Config(asgi, host=host, port=port, log_level="info"))
    # The worker reports each attempt's firing lag and outcome to the app's /metrics.
    running = (
        scheduler.running_worker(concurrency=concurrency, on_attempt=metrics.observe_attempt)
        if worker
        else contextlib.nullcontext()
    )
    try:
        with running:
            log.info("serving on http://%s:%d (worker: %s; %s)", host, port, worker, guard)
            server.run()  # returns on SIGTERM/SIGINT; the worker then stops gracefully
    finally:
        store.close()
