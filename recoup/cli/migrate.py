"""`recoup migrate`: bring a database's schema up to date.

Contract:

    recoup migrate [--db URL] [--schema S] [--json]
        → {"backend": "sqlite" | "postgresql", "db": URL (password hidden),
           "schema": S | null, "from_version": N, "schema_version": M, "applied": [file, …]}

Applies every numbered migration of the backend that the database lacks, in order, each in
its own transaction, and records its number; running it again applies nothing. Stores also
migrate when they open, so this is for deploys that migrate before starting processes.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

import typer

from recoup.cli._app import app, print_json
from recoup.errors import InvalidInput
from recoup.storage import DEFAULT_DB_URL, open_store
from recoup.storage._sql import load_migrations


def _hide_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


@app.command("migrate")
def migrate_command(
    db: Annotated[
        str,
        typer.Option(
            "--db", envvar="RECOUP_DB", help="Database URL (sqlite:///… or postgresql://…)."
        ),
    ] = DEFAULT_DB_URL,
    schema: Annotated[
        str | None, typer.Option(help="PostgreSQL schema holding Recoup's tables.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Apply pending schema migrations to the database."""
    options: dict[str, Any] = {"migrate": False}
    if schema is not None and not db.startswith(("postgresql://", "postgres://")):
        raise InvalidInput("--schema", schema, "only PostgreSQL databases have schemas")
    if schema is not None:
        options["schema"] = schema
    store = open_store(db, **options)
    try:
        before = store.schema_version()
        after = store.migrate()
        applied = [
            m.name for m in load_migrations(store.migrations_package) if before < m.version <= after
        ]
    finally:
        store.close()
    result = {
        "backend": store.backend,
        "db": _hide_password(db),
        "schema": getattr(store, "schema", None),
        "from_version": before,
        "schema_version": after,
        "applied": applied,
    }
    if as_json:
        print_json(result)
        return
    if applied:
        typer.echo(f"{result['db']}: applied {', '.join(applied)}; schema version {after}")
    else:
        typer.echo(f"{result['db']}: up to date at schema version {after}")
