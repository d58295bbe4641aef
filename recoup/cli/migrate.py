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

from typing import Any

import typer

from recoup.cli._app import DbOption, JsonOption, SchemaOption, app, print_json, store_options
from recoup.cli._where import LocalOnlyUrlOption
from recoup.storage import DEFAULT_DB_URL, open_store, redact_url


@app.command("migrate")
def migrate_command(
    db: DbOption = DEFAULT_DB_URL,
    schema: SchemaOption = None,
    as_json: JsonOption = False,
    url: LocalOnlyUrlOption = None,
) -> None:
    """Apply pending schema migrations to the database."""
    options: dict[str, Any] = {"migrate": False, **store_options(schema, db)}
    store = open_store(db, **options)
    try:
        before = store.schema_version()
        after = store.migrate()
        applied = [m.name for m in store.migrations() if before < m.version <= after]
    finally:
        store.close()
    result = {
        "backend": store.backend,
        "db": redact_url(db),
        "schema": store.schema,
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
