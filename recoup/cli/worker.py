"""`recoup worker`: run due jobs from a database until SIGTERM or SIGINT.

Contract:

    recoup worker [--db URL] [--schema NAME] [--concurrency N] [--allow-private-targets]
        [--allow-cidr CIDR ...] [--lease-seconds S] [--grace-seconds S] [--batch-size N]
        [--worker-id ID] [--handlers module:attribute]

SIGTERM or SIGINT shuts down gracefully: no new claims, claimed jobs that have not started are
released, running attempts get `--grace-seconds` to finish, every completion is written; exit
0. Private, loopback and link-local targets are refused unless `--allow-private-targets`,
`RECOUP_ALLOW_PRIVATE_TARGETS=1`, or an `--allow-cidr` block covers them.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
from datetime import timedelta
from typing import Annotated, Any

import typer

from recoup.cli._app import app
from recoup.errors import InvalidInput
from recoup.jobs.handlers import HandlerRegistry
from recoup.jobs.ssrf import ALLOW_PRIVATE_ENV, SsrfGuard
from recoup.jobs.worker import Worker

log = logging.getLogger("recoup.worker")

_TRUE = ("1", "true", "yes", "on")


def load_handlers(spec: str) -> HandlerRegistry:
    """Import `module:attribute` and return the `HandlerRegistry` it names."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidInput(
            "--handlers", spec, "expected module:attribute, e.g. myapp.jobs:registry"
        )
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise InvalidInput("--handlers", spec, f"cannot import it ({exc})") from None
    if not isinstance(found, HandlerRegistry):
        raise InvalidInput("--handlers", spec, "expected a recoup.jobs.HandlerRegistry")
    return found


@app.command("worker")
def worker_command(
    db: Annotated[
        str,
        typer.Option(
            "--db", envvar="RECOUP_DB", help="Database URL (sqlite:///… or postgresql://…)."
        ),
    ] = "sqlite:///recoup.db",
    schema: Annotated[
        str | None, typer.Option(help="PostgreSQL schema holding Recoup's tables.")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Attempts run at once.")] = 100,
    allow_private_targets: Annotated[
        bool,
        typer.Option(help=f"Allow private/loopback targets (or {ALLOW_PRIVATE_ENV}=1)."),
    ] = False,
    allow_cidr: Annotated[
        list[str] | None, typer.Option(help="Allow targets in this CIDR block (repeatable).")
    ] = None,
    lease_seconds: Annotated[float, typer.Option(min=0.1, help="Lease per claimed job.")] = 30.0,
    grace_seconds: Annotated[
        float, typer.Option(min=0.0, help="Time running attempts get to finish on shutdown.")
    ] = 30.0,
    batch_size: Annotated[int, typer.Option(min=1, help="Jobs per claim.")] = 1000,
    worker_id: Annotated[
        str | None, typer.Option(help="This worker's id in leases and logs.")
    ] = None,
    handlers: Annotated[
        str | None, typer.Option(help="Python handlers: module:attribute of a HandlerRegistry.")
    ] = None,
) -> None:
    """Run due jobs until SIGTERM/SIGINT, then shut down gracefully."""
    from recoup.storage import open_store

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    allow_private = allow_private_targets or os.environ.get(ALLOW_PRIVATE_ENV, "").lower() in _TRUE
    guard = SsrfGuard(allow_private=allow_private, allowed_cidrs=allow_cidr or ())
    registry = load_handlers(handlers) if handlers else HandlerRegistry()
    options: dict[str, Any] = {"schema": schema} if schema else {}
    store = open_store(db, **options)
    worker = Worker(
        store,
        handlers=registry,
        concurrency=concurrency,
        worker_id=worker_id,
        lease=timedelta(seconds=lease_seconds),
        grace=timedelta(seconds=grace_seconds),
        batch_size=batch_size,
        ssrf=guard,
    )

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.request_stop)
        log.info("worker %s started (concurrency %d, %s)", worker.worker_id, concurrency, guard)
        await worker.run()

    try:
        asyncio.run(main())
    finally:
        store.close()
    log.info("worker %s stopped: %s", worker.worker_id, worker.stats)
