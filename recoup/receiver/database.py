"""The handler's own database as the receiver uses it: SQLite (a file) or PostgreSQL (a
connection pool), the receiver's two tables in it, and one write transaction at a time.

The receiver's tables (`receiver_idempotency_keys`, `receiver_charges`) live next to the
user's invoice table, so that a charge can lock the invoice, read the ledger, record the
result and mark the invoice paid in one transaction. The user's callbacks (`InvoiceBook`)
receive the very connection of that transaction, typed by the backend: `sqlite3.Connection`
or `psycopg.Connection`.

- `SqliteDatabase(path)`: `BEGIN IMMEDIATE`, so a transaction holds the database's write lock
  from its first statement: that is the "lock" of an invoice on SQLite, and it makes all
  charges of one database run one at a time. The threads of one process queue for it on an
  in-process lock, each woken the moment the one before commits, rather than in SQLite's busy
  handler, which sleeps 1, 2, 5 … 100 ms between tries (other processes still meet at SQLite's
  own lock and its busy timeout); so one connection serves them all, kept open: a connection
  per transaction made each commit the last connection's close, which checkpoints the WAL
  into the database file (a few fsyncs per charge). WAL mode, set by
  `ensure_schema`, lets readers go on meanwhile. A file path is required: `:memory:` would be a
  new, empty database per connection.
- `PostgresDatabase.connect(conninfo)` or `PostgresDatabase(pool)` (`recoup.receiver.postgres`):
  each transaction takes a
  pooled connection; the user's lock query takes the invoice row (`SELECT … FOR UPDATE`) and
  the receiver adds its own transaction-scoped advisory lock on the invoice id, so charges of
  different invoices run in parallel and charges of one invoice run one at a time.

Database errors leave as `StorageError` (answered 503, so Recoup retries the attempt).
SQL lives in `sqlite.sql` and `postgres.sql` next to this module, in named blocks.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any, Final, Generic, TypeVar

from recoup.errors import InvalidInput, StorageError
from recoup.timekeeping.instants import require_aware

C = TypeVar("C")

DEFAULT_BUSY_TIMEOUT: Final = 30.0  # seconds a SQLite transaction waits for the write lock
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_BLOCK: Final = re.compile(r"^-- ([a-z_]+) --[ \t]*$", re.MULTILINE)

# One lock per database file for the whole process (see the module docstring).
_SYNCHRONOUS: Final = ("OFF", "NORMAL", "FULL", "EXTRA")
_WRITE_LOCKS: dict[str, threading.Lock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _write_lock(path: str) -> threading.Lock:
    with _WRITE_LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(os.path.realpath(path), threading.Lock())


def load_queries(filename: str) -> dict[str, str]:
    """The named blocks (`-- name --` up to the next such line) of one of this package's
    `.sql` files."""
    text = resources.files("recoup.receiver").joinpath(filename).read_text("utf-8")
    parts = _BLOCK.split(text)  # [preamble, name1, body1, name2, body2, ...]
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


class Database(ABC, Generic[C]):
    """A database holding the receiver's tables; `C` is its connection type."""

    queries: Mapping[str, str]

    @abstractmethod
    def transaction(self) -> AbstractContextManager[C]:
        """A write transaction, committed when the block ends, rolled back if it raises."""

    @abstractmethod
    def fetch(self, conn: C, name: str, params: Mapping[str, object]) -> list[tuple[Any, ...]]:
        """The rows of the named query."""

    @abstractmethod
    def run(self, conn: C, name: str, params: Mapping[str, object]) -> int:
        """Run the named statement; return how many rows it changed."""

    @abstractmethod
    def lock_invoice(self, conn: C, invoice_id: str) -> None:
        """Hold the receiver's own lock on `invoice_id` until the transaction ends."""

    @abstractmethod
    def encode_instant(self, instant: datetime) -> object:
        """An instant as this backend stores it."""

    @abstractmethod
    def decode_instant(self, value: Any) -> datetime:
        """A stored instant, aware and in UTC."""

    @abstractmethod
    def ensure_schema(self) -> None:
        """Create the receiver's tables and indexes where they are missing (safe to repeat)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections this object opened."""


class SqliteDatabase(Database[sqlite3.Connection]):
    """The receiver's tables in the SQLite file at `path` (see the module docstring).

    `synchronous="NORMAL"` trades the last commits on power loss (never on a process crash)
    for fewer fsyncs, as Recoup's own SQLite store offers; FULL is the default."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        synchronous: str = "FULL",
    ):
        self.path = os.fspath(path)
        if self.path in ("", ":memory:") or self.path.startswith("file::memory:"):
            raise ValueError(f"path: {self.path!r}: expected a file (each connection is new)")
        if synchronous.upper() not in _SYNCHRONOUS:
            raise InvalidInput("synchronous", synchronous, f"expected one of {_SYNCHRONOUS}")
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous.upper()
        self.queries = load_queries("sqlite.sql")
        self._write_lock = _write_lock(self.path)
        self._conn: sqlite3.Connection | None = None
        self._pid = 0  # the process that opened `_conn` (a forked child opens its own)

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: the module issues no implicit BEGIN; ours is explicit.
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        return conn

    def _connection(self) -> sqlite3.Connection:
        """The one connection, used by one transaction at a time (under the write lock)."""
        if self._conn is None or self._pid != os.getpid():
            self._conn, self._pid = self._connect(), os.getpid()
        return self._conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if not self._write_lock.acquire(timeout=self.busy_timeout):
            raise StorageError(f"SQLite {self.path}: database is locked (by this process)")
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                # SQLite may have rolled back already (a full disk): no transaction to end.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error:
                if conn.in_transaction:  # a failed COMMIT leaves the transaction open
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite {self.path}: {exc}") from exc
        finally:
            self._write_lock.release()

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._transaction()

    def fetch(
        self, conn: sqlite3.Connection, name: str, params: Mapping[str, object]
    ) -> list[tuple[Any, ...]]:
        try:
            return conn.execute(self.queries[name], params).fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite {self.path} ({name}): {exc}") from exc

    def run(self, conn: sqlite3.Connection, name: str, params: Mapping[str, object]) -> int:
        try:
            return conn.execute(self.queries[name], params).rowcount
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite {self.path} ({name}): {exc}") from exc

    def lock_invoice(self, conn: sqlite3.Connection, invoice_id: str) -> None:
        # BEGIN IMMEDIATE already holds the database's write lock: nothing more to take.
        return None

    def encode_instant(self, instant: datetime) -> int:
        return (require_aware("instant", instant) - _EPOCH) // timedelta(microseconds=1)

    def decode_instant(self, value: Any) -> datetime:
        return _EPOCH + timedelta(microseconds=int(value))

    def ensure_schema(self) -> None:
        conn = self._connect()
        try:
            # WAL: readers (the user's pages) are not blocked by a charge in progress.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(self.queries["schema"])
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite {self.path}: {exc}") from exc
        finally:
            conn.close()

    def close(self) -> None:
        with self._write_lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                conn.close()


__all__ = ["DEFAULT_BUSY_TIMEOUT", "Database", "SqliteDatabase", "load_queries"]
