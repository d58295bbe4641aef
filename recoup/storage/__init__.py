"""Storage backends: `open_store(url)` opens SQLite or PostgreSQL as one `Store`, and
`open_api_tables(store)` the HTTP API's tables in the same database.

Accepted URLs:
- `sqlite:///relative/path.db` (relative to the working directory), `sqlite:////abs/path.db`,
  `sqlite://:memory:` (or `sqlite:///:memory:`), or a bare path ending `.db`, `.sqlite` or
  `.sqlite3`;
- `postgresql://…` or `postgres://…` (libpq URL; options such as `schema` go in `opts`).

The modules of the package:
- `protocol`: `Store` and `ApiTables`, the types the rest of Recoup sees;
- `dialect`: `Dialect`, what the shared table code needs of a backend (connections for reading
  and one write transaction, `atomically`, the instant codec, booleans and lists, batch quirks,
  the one map of named queries), and `QUERY_FILES`, the query files every dialect loads;
- `sqlite/`, `postgres/`: one package per backend: its `dialect` (the one dialect object), the
  hot path written for its driver in `queue` (inserts, claims, completions, rescues,
  waiting), worker sessions in `workers`, migrations in `migrator`, claiming an idempotency
  key in `key_claims`, its `store` (which only assembles those parts), and its queries and
  numbered migrations as `.sql` files;
- `sql_store`: `SqlStore`, the store assembled from a backend's parts and the table classes,
  each `Store` operation bound to the part that does it;
- the table classes, each written once over the dialect it takes: `job_tables` (jobs, runs,
  schedules, tenants, the workers' list), `lease_tables` (heartbeats, releases),
  `dunning_tables` (invoices, attempts, events, settings), `dunning_reports` (the recovery
  report's reads, merchant tags), `tenant_tables` (disabling, secrets, deleting),
  `intake_tables` (intake settings, provider events), `dead_letters` (redrive, delete),
  `change_tables` (PATCH of a job or a schedule), `customer_tables` (customers: address,
  locale, suppression, access; their renewals: `store.customers`), `api_tables`
  (idempotency keys and tokens: what `open_api_tables` returns);
- `rules`: the rules both backends follow (checks, conflicts, completions, lost leases);
- `job_rows`, `row_decoding`: the job scheduler's records into rows and back; `dunning_rows`:
  the dunning records' rows; `sql_files`: loading the `.sql` files.

Adding a table module: write `xyz_tables.py` with a class `SqlXyzTables` whose constructor takes
the `Dialect` (`self._dialect = dialect; self._sql = dialect.queries`) and whose operations read
through `dialect.read()` / `dialect.snapshot()`, write through `dialect.write()` (one
transaction; inside `atomically`, part of the unit) and encode and decode instants, booleans and
lists with the dialect's codec, never by backend; put its SQL in named blocks (`-- name --`) in
a new `xyz_queries.sql` in both `sqlite/` and `postgres/`, listed in `dialect.QUERY_FILES` (a
name must be new across the files); add its tables in a new numbered migration of each backend
(rows that belong to a tenant: a `delete_<table>` block in `tenant_queries.sql` and the table in
`tenant_tables.TENANT_TABLES`, children first); then build it once in `SqlStore.__init__` and
bind its operations there, and declare them in the protocol its callers use (and in `Store`).
Neither backend's `store.py` changes. Only an operation whose driver code really differs (as the
hot path) goes to each backend's package, behind a small protocol that `StoreParts` carries.
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
