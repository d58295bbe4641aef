"""Storage backends: `open_store(url)` opens SQLite or PostgreSQL as one `Store`, and
`open_api_tables(store)` the HTTP API's tables in the same database.

Accepted URLs:
- `sqlite:///relative/path.db` (relative to the working directory), `sqlite:////abs/path.db`,
  `sqlite://:memory:` (or `sqlite:///:memory:`), or a bare path ending `.db`, `.sqlite` or
  `.sqlite3`;
- `postgresql://…` or `postgres://…` (libpq URL; options such as `schema` go in `opts`).

The modules of the package:
- `protocol`: `Store` and `ApiTables`, the types the rest of Recoup sees;
- `sqlite/`, `postgres/`: one package per backend (its store, the worker's hot path in `queue`,
  its API tables, its queries and numbered migrations as `.sql` files);
- `sql_store`, `dunning_tables`, `api_tables`: the operations written once over both backends'
  hooks (jobs, schedules and tenants; invoices; idempotency keys and tokens);
- `rules`: the rules both backends follow (checks, conflicts, completions, lost leases);
- `job_rows`, `row_decoding`: the job scheduler's records into rows and back; `dunning_rows`:
  the dunning records' rows; `sql_files`: loading the `.sql` files.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from recoup.errors import InvalidInput
from recoup.storage.protocol import ApiTables, Store
from recoup.storage.sql_files import Migration

__all__ = [
    "DEFAULT_DB_URL",
    "SCHEMA_NAME_ALLOWED",
    "ApiTables",
    "Migration",
    "Store",
    "is_postgres_url",
    "open_api_tables",
    "open_store",
    "redact_url",
    "sqlite_path",
    "valid_schema_name",
]

DEFAULT_DB_URL = "sqlite:///recoup.db"  # a file in the working directory

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_ALLOWED = (
    "expected sqlite:///path.db, sqlite://:memory:, a path ending .db/.sqlite,"
    " or postgresql://user@host:port/database"
)
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
SCHEMA_NAME_ALLOWED = "expected a lower-case SQL identifier (a-z, 0-9, _; at most 63)"


def sqlite_path(url: str) -> str | None:
    """The file path (or `:memory:`) a SQLite URL names; None if `url` is not SQLite."""
    if url.startswith("sqlite://"):
        rest = url.removeprefix("sqlite://")
        if rest in (":memory:", "/:memory:"):
            return ":memory:"
        if not rest.startswith("/") or rest == "/":
            return None  # sqlite://host/… has no meaning here
        return rest[1:]  # sqlite:///rel → rel, sqlite:////abs → /abs
    if "://" not in url and url.lower().endswith(_SQLITE_SUFFIXES):
        return url
    return None


def is_postgres_url(url: str) -> bool:
    """Whether `url` names a PostgreSQL database (the only backend with schemas)."""
    return url.startswith(_POSTGRES_SCHEMES)


def valid_schema_name(name: str) -> bool:
    """Whether `name` is a PostgreSQL schema name the store accepts (it is interpolated into
    SQL)."""
    return bool(_SCHEMA_NAME.match(name))


def redact_url(url: str) -> str:
    """`url` with its password (if any) replaced by `***`, for messages and logs."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url.split("@", 1)[-1] if "@" in url else url
    if password is None:
        return url
    netloc = parts.netloc.replace(f":{password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def open_store(url: str, **opts: Any) -> Store:
    """Open (and, unless `migrate=False`, migrate) the store that `url` names.

    `opts` go to the backend's constructor (`SqliteStore` or `PostgresStore`)."""
    path = sqlite_path(url)
    if path is not None:
        from recoup.storage.sqlite.store import SqliteStore

        return SqliteStore(path, **opts)
    if is_postgres_url(url):
        from recoup.storage.postgres.store import PostgresStore

        return PostgresStore(url, **opts)
    raise InvalidInput("--db", url, _ALLOWED)


def open_api_tables(store: Store) -> ApiTables:
    """The HTTP API's tables (idempotency keys, tokens) in the same database as `store`."""
    return store.api_tables()
