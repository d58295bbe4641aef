"""The PostgreSQL dialect: a `psycopg_pool.ConnectionPool` whose every connection runs with
`search_path` set to the store's schema and `TimeZone` UTC (so the SQL in the `.sql` files
never names a schema), its transactions, one-statement autocommit, units of work on one
connection, instants as timestamptz, jsonb read back as its text, and the backend's one map of
named queries.

Batch statements (listings, pruning, and the queue's) run with `prepare=False`: psycopg would
otherwise switch them to a prepared generic plan after five runs, which cannot see the array
sizes or which optional filters are NULL, and may scan a whole index where the planned-each-time
version looks ids up in the primary key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import AdaptersMap, Loader
from psycopg.pq import Format
from psycopg_pool import ConnectionPool, PoolTimeout

from recoup.errors import InvalidInput, StorageError
from recoup.storage import SCHEMA_NAME_ALLOWED, redact_url, valid_schema_name
from recoup.storage.dialect import load_dialect_queries
from recoup.storage.job_rows import aware_utc

T = TypeVar("T")

QUERIES = load_dialect_queries("recoup.storage.postgres")

DEFAULT_SCHEMA = "recoup"
POOL_TIMEOUT = 30.0  # seconds to wait for a free pooled connection
CONNECT_TIMEOUT = 10  # seconds to establish one connection
PROBE_TIMEOUT = 5  # seconds for the one connection tried before the pool opens


class _JsonbTextLoader(Loader):
    """jsonb as its JSON text, for `row_decoding` to decode (or look up: targets repeat) itself,
    as it does SQLite's JSON text. (psycopg's own loader would hand back a decoded value, which
    `row_decoding` cannot tell from JSON text when it is a string.)"""

    def load(self, data: Buffer) -> str:
        return bytes(data).decode()


class _JsonbBinaryTextLoader(Loader):
    """The same for binary results: jsonb's wire format is a version byte, then the text."""

    format = Format.BINARY

    def load(self, data: Buffer) -> str:
        return bytes(data[1:]).decode()


# The adapters of every connection of the store (jobs, schedules and invoice events: every
# jsonb column is decoded from text by the code that reads it).
_ADAPTERS = AdaptersMap(psycopg.adapters)
_ADAPTERS.register_loader("jsonb", _JsonbTextLoader)
_ADAPTERS.register_loader("jsonb", _JsonbBinaryTextLoader)


class PostgresDialect:
    """One PostgreSQL schema as the table code sees it (`recoup.storage.Dialect`), plus what
    this backend's queue, worker sessions and migrations use of it: the pool's connection
    (`connection`), the URL and the options of every connection (`connect_kwargs`)."""

    backend = "postgresql"
    queries: Mapping[str, str] = QUERIES
    migrations_package = "recoup.storage.postgres.migrations"
    row_instant = staticmethod(aware_utc)
    decode_instant = staticmethod(aware_utc)

    def __init__(self, url: str, *, schema: str, min_size: int, max_size: int) -> None:
        if not valid_schema_name(schema):
            raise InvalidInput("schema", schema, SCHEMA_NAME_ALLOWED)
        self.url = url
        self.schema: str = schema
        self.channel = f"{schema}_jobs"
        self._unit = threading.local()  # `.conn`: the transaction of a unit of work
        self._probe(url)
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=POOL_TIMEOUT,
            kwargs=self.connect_kwargs(),
            open=False,
            name=f"recoup-{schema}",
        )
        try:
            self._pool.open(wait=True, timeout=POOL_TIMEOUT)
        except PoolTimeout as exc:
            self._pool.close()
            raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc

    def _probe(self, url: str) -> None:
        """Connect once, with a short timeout, before opening the pool: an unreachable or
        refusing server is one clear `StorageError` naming the URL (password hidden) within
        `PROBE_TIMEOUT`, not `POOL_TIMEOUT` of pool retries and their warnings."""
        kwargs = {**self.connect_kwargs(), "connect_timeout": PROBE_TIMEOUT}
        try:
            psycopg.connect(url, **kwargs).close()
        except psycopg.Error as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            reason = lines[0] if lines else type(exc).__name__
            raise StorageError(
                f"cannot connect to PostgreSQL at {redact_url(url)}: {reason}"
            ) from None

    def connect_kwargs(self) -> dict[str, Any]:
        """The options of every connection of the store: the pool's, the listener's and the
        worker sessions'."""
        # JIT off: the store's statements touch a batch of rows through an index, but the
        # planner's estimate for some (the flow keys' recursive walk, on a table of 100,000
        # due jobs) crosses jit_above_cost, and PostgreSQL then spent about 0.4 s compiling a
        # statement that runs in a millisecond, at every claim: a one-worker drain of 100,000
        # no-op jobs went at 5,400 jobs/s instead of 17,500.
        return {
            "options": f"-c search_path={self.schema} -c TimeZone=UTC -c jit=off",
            "connect_timeout": CONNECT_TIMEOUT,
            "context": _ADAPTERS,
        }

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in a transaction, committed on success; inside a unit of work
        (`atomically`), the unit's connection and transaction."""
        unit: psycopg.Connection[Any] | None = getattr(self._unit, "conn", None)
        try:
            if unit is not None:
                yield unit
                return
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StorageError(f"no PostgreSQL connection available: {exc}") from exc
        except psycopg.DataError as exc:
            # A value the database cannot take (NUL in text, a number out of range): the
            # caller's input, not an outage, so not a 503 that invites pointless retries. The
            # transaction was rolled back: nothing of it is stored.
            raise InvalidInput("input", None, f"a value the database cannot store ({exc})") from exc
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL: {exc}") from exc

    @contextmanager
    def statement_write(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in autocommit, for operations that are one statement on their
        usual path (inserting a job): each statement is its own transaction, one round trip,
        where a transaction block costs three (BEGIN, the statement, COMMIT). What follows a
        statement runs in a snapshot of its own, as in a READ COMMITTED transaction."""
        if getattr(self._unit, "conn", None) is not None:
            with self.connection() as conn:  # inside a unit of work: its transaction
                yield conn
            return
        with self.connection() as conn:
            conn.autocommit = True
            try:
                yield conn
            finally:
                try:
                    conn.autocommit = False
                except psycopg.Error:
                    # Broken mid-statement: never hand back an autocommit connection; the
                    # pool replaces a closed one.
                    conn.close()

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run `fn`, whose reads and writes go through this store, as one transaction on one
        pooled connection: committed when it returns, rolled back if it raises (one commit,
        one WAL flush, where each operation alone would commit its own; PostgreSQL flushes
        the commits of concurrent transactions together). `fn` must touch no other store;
        a nested `atomically` is part of the unit."""
        if getattr(self._unit, "conn", None) is not None:
            return fn()
        with self.connection() as conn:
            self._unit.conn = conn
            try:
                return fn()
            finally:
                self._unit.conn = None

    def read(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection in a transaction, committed when the block ends (rolled back if
        it raises): `search_path`, UTC and error translation (`StorageError`) included."""
        return self.connection()

    @contextmanager
    def snapshot(self) -> Iterator[psycopg.Connection[Any]]:
        """A read-only REPEATABLE READ transaction: every statement sees the snapshot of the
        first (READ COMMITTED, the default, takes one per statement)."""
        with self.connection() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    def write(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """The same as `read()`: on PostgreSQL every block is one transaction, and row locks,
        not a database-wide write lock, serialise writers. Named apart so that code sharing a
        store reads the same on both backends."""
        return self.connection()

    statement_read = statement_write  # autocommit: a read that is one statement, one round trip

    def close(self) -> None:
        self._pool.close()

    # Values and statements

    @staticmethod
    def encode_instant(value: datetime, /) -> datetime:
        return value  # psycopg sends datetimes as timestamptz

    @staticmethod
    def encode_bool(value: bool, /) -> bool:
        return value

    @staticmethod
    def encode_texts(values: Sequence[str], /) -> list[str]:
        return list(values)  # text[]

    @staticmethod
    def plan_queue(conn: psycopg.Connection[Any], /) -> None:
        """Pin index-driven plans for the transaction (`queue_plans`), so that a queue
        statement's cost follows the batch, not the table, even on stale statistics."""
        conn.execute(QUERIES["queue_plans"])

    @staticmethod
    def execute_batch(
        conn: psycopg.Connection[Any], query: str, params: Mapping[str, Any], /
    ) -> psycopg.Cursor[Any]:
        return conn.execute(query, params, prepare=False)

    @staticmethod
    def read_clock(conn: psycopg.Connection[Any], /) -> datetime:
        row = conn.execute(QUERIES["store_clock"]).fetchone()
        assert row is not None  # a SELECT without FROM returns its one row
        return aware_utc(row[0])

    def wake_workers(self, conn: psycopg.Connection[Any], /) -> None:
        conn.execute(QUERIES["notify"], {"channel": self.channel})  # delivered at commit

    def jobs_inserted(self) -> None:
        """Nothing: waiters LISTEN, and the notification went out at commit."""


__all__ = ["DEFAULT_SCHEMA", "PROBE_TIMEOUT", "QUERIES", "PostgresDialect"]
