"""What the table code written once needs of a backend: the `Dialect` (its connections, its one
write transaction, its encoding of instants, booleans and lists, its batch quirks and its one
map of named queries), and the query files every dialect loads into that map.

Each backend is one dialect object (`sqlite.dialect.SqliteDialect`,
`postgres.dialect.PostgresDialect`); the table classes (`job_tables`, `dunning_tables`, …) take
it as their argument, and each store hands the same one to all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

from recoup.jobs.model import NewJob
from recoup.storage.dunning_rows import EXPANSIONS as DUNNING_EXPANSIONS
from recoup.storage.sql_files import load_queries

T = TypeVar("T")

# Every backend package holds these files, each a set of named query blocks; their blocks form
# the dialect's one map (a name is defined once across the files: checked at load time). A new
# table module's queries are a new file here, written in both backends' packages.
QUERY_FILES: Mapping[str, Mapping[str, str]] = {
    "queries.sql": {},  # jobs, runs, schedules, tenants, workers, migrations' bookkeeping
    "dunning_queries.sql": DUNNING_EXPANSIONS,  # invoices, events, settings, reports, tags
    "tenant_queries.sql": {},  # disabling, secrets and deleting tenants
    "intake_queries.sql": {},  # intake settings and provider events
    "api_queries.sql": {},  # idempotency keys and API tokens
    "hosted_queries.sql": {},  # hosted charging: a tenant's provider key, the charge ledger
    "message_queries.sql": {},  # customers' emails: a tenant's settings, the email ledger
    "customer_queries.sql": {},  # customers (address, locale, access) and their renewals
    "redrive_queries.sql": {},  # bulk redrive: the failed jobs a filter names
}


def load_dialect_queries(package: str) -> dict[str, str]:
    """The named blocks of every file of `QUERY_FILES` in a backend's `package`, as one map."""
    queries: dict[str, str] = {}
    for filename, expansions in QUERY_FILES.items():
        for name, text in load_queries(package, filename, expansions).items():
            if name in queries:
                raise ValueError(f"query {name!r} of {filename} is defined in another file too")
            queries[name] = text
    return queries


def ping(dialect: Dialect) -> None:
    """Raise `StorageError` unless the database answers."""
    with dialect.read() as conn:
        conn.execute("SELECT 1").fetchone()


class Dialect(Protocol):
    """One backend as the shared table code sees it."""

    @property
    def backend(self) -> str:
        """ "sqlite" or "postgresql"."""
        ...

    @property
    def schema(self) -> str | None:
        """The PostgreSQL schema holding the tables; None on SQLite."""
        ...

    @property
    def queries(self) -> Mapping[str, str]:
        """Every named query of the backend (`QUERY_FILES`), SQL in the backend's dialect."""
        ...

    @property
    def migrations_package(self) -> str:
        """The package of the backend's `NNNN_*.sql` migrations."""
        ...

    # Connections

    def read(self) -> AbstractContextManager[Any]:
        """A connection for reading (SQLite: autocommit; PostgreSQL: a transaction)."""
        ...

    def write(self) -> AbstractContextManager[Any]:
        """One write transaction, committed when the block ends, rolled back if it raises."""
        ...

    def snapshot(self) -> AbstractContextManager[Any]:
        """A connection on which successive statements read one snapshot of the database."""
        ...

    def statement_write(self) -> AbstractContextManager[Any]:
        """A connection for a write that is one statement (PostgreSQL: autocommit, one round
        trip; SQLite: `write()`). Inside a unit of work (`atomically`), the unit's transaction
        on both, without a savepoint: one statement fails whole on its own."""
        ...

    def statement_read(self) -> AbstractContextManager[Any]:
        """A connection for a read that is one statement (PostgreSQL: autocommit; SQLite:
        `read()`)."""
        ...

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run `fn`, whose reads and writes go through this dialect, as one transaction."""
        ...

    # Values

    def encode_instant(self, value: datetime, /) -> Any:
        """An instant as a query parameter."""
        ...

    def row_instant(self, value: datetime, /) -> Any:
        """An instant in a row `job_rows` encodes."""
        ...

    def decode_instant(self, value: Any, /) -> datetime:
        """An instant from a column."""
        ...

    def encode_bool(self, value: bool, /) -> Any:
        """A boolean as a query parameter."""
        ...

    def encode_texts(self, values: Sequence[str], /) -> Any:
        """Strings as one query parameter (PostgreSQL's text[]; SQLite's JSON array)."""
        ...

    # Statements

    def plan_queue(self, conn: Any, /) -> None:
        """Whatever the backend runs before a statement over the queue in a transaction."""
        ...

    def execute_batch(self, conn: Any, query: str, params: Mapping[str, Any], /) -> Any:
        """Run a batch statement (listings, pruning), whose plan depends on its parameters."""
        ...

    def read_clock(self, conn: Any, /) -> datetime:
        """The database's clock, read on `conn` (named query `store_clock`): what decides
        claims, leases and rescues for callers on the wall clock (ARCHITECTURE.md, 'Clock
        skew'). PostgreSQL: `clock_timestamp()` of its server; SQLite: the machine's clock
        (which SQLite's `'now'` reads, to the millisecond only), shared by every process on
        the file."""
        ...

    def wake_workers(self, conn: Any, /) -> None:
        """Inside a transaction that made jobs due: let idle workers of every process know once
        it commits (SQLite bumps its wake-up counter, PostgreSQL notifies)."""
        ...

    def jobs_inserted(self) -> None:
        """After a transaction that made jobs due has committed: wake this process's waiters."""
        ...


class JobInserts(Protocol):
    """How a backend inserts a batch of new jobs inside a caller's write transaction (its
    queue's hot path), for `advance_schedule`."""

    def prepare_jobs(self, jobs: Sequence[NewJob], now: datetime) -> Sequence[Any]:
        """The jobs as `insert_prepared` takes them, made before the write transaction."""
        ...

    def insert_prepared(self, conn: Any, prepared: Sequence[Any], now: datetime) -> int:
        """Insert them, skipping clashes; how many were inserted."""
        ...


__all__ = ["QUERY_FILES", "Dialect", "JobInserts", "load_dialect_queries", "ping"]
