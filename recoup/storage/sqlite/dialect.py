"""The SQLite dialect: one file's connections (one per thread; `:memory:` one shared under a
lock), its write transactions (`BEGIN IMMEDIATE` under the file's writer lock), units of work
sharing one commit (`group_commit`), in-process wake-ups, instants as integer microseconds and
the backend's one map of named queries.

- WAL journal (readers never block the writer) and a busy timeout (writers queue instead of
  failing at once); every write is one `BEGIN IMMEDIATE` transaction, so a claim takes the write
  lock before it reads and two claimers can never pick the same job.
- One connection per thread (`sqlite3` connections are not meant to be shared across threads);
  `:memory:` databases are the exception: one connection guarded by a lock, since each new
  connection to `:memory:` would be a different, empty database.
- Instants are INTEGER microseconds since the Unix epoch in UTC: exact, compact and ordered as
  integers (see `0001_init.sql`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from recoup.errors import InvalidInput, StorageError
from recoup.storage.dialect import load_dialect_queries
from recoup.storage.job_rows import from_micros, micros
from recoup.storage.sqlite import writer_lock
from recoup.storage.sqlite.group_commit import GroupCommit, Unit, run_unit, savepoint
from recoup.storage.sqlite.writer_lock import WriterLock

T = TypeVar("T")

QUERIES = load_dialect_queries("recoup.storage.sqlite")

MEMORY = ":memory:"
BUSY_TIMEOUT = 10.0  # seconds a writer waits for the write lock before giving up

# Every write transaction takes its file's writer lock first (`writer_lock`): this process's
# threads queue on a Python lock and the processes on a file lock, each woken the moment the
# one before commits, instead of in SQLite's busy handler, which sleeps 1, 2, 5 … 100 ms
# between tries: under 16 concurrent API requests that sleeping made the p99 of a job's
# creation 700 ms. Re-entrant, so that a nested write on one thread fails as before (SQLite
# refuses the nested BEGIN), not deadlocks.


class _ThreadConnection:
    """One thread's connection, held through `threading.local` (sqlite3 connections cannot
    be weakly referenced themselves)."""

    __slots__ = ("__weakref__", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


def _forget(
    connections: list[sqlite3.Connection], lock: threading.Lock, conn: sqlite3.Connection
) -> None:
    with lock:
        if conn in connections:
            connections.remove(conn)
    conn.close()


class Wakeups:
    """In-process wake-ups per database file: a counter and a condition."""

    _lock = threading.Lock()
    _by_path: dict[str, Wakeups] = {}  # noqa: RUF012  (a registry shared by all instances)

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.generation = 0

    @classmethod
    def for_path(cls, path: str) -> Wakeups:
        with cls._lock:
            found = cls._by_path.get(path)
            if found is None:
                found = cls._by_path[path] = cls()
            return found

    def notify(self) -> None:
        with self.condition:
            self.generation += 1
            self.condition.notify_all()


class SqliteDialect:
    """One SQLite file (or `:memory:`) as the table code sees it (`recoup.storage.Dialect`),
    plus what this backend's queue and worker sessions use of it: connections of their own
    (`own_connection`), the write transaction on them (`transaction`) and the wake-ups."""

    backend = "sqlite"
    schema = None
    queries: Mapping[str, str] = QUERIES
    migrations_package = "recoup.storage.sqlite.migrations"
    encode_instant = staticmethod(micros)
    row_instant = staticmethod(micros)
    decode_instant = staticmethod(from_micros)

    def __init__(self, path: str, *, busy_timeout: float, synchronous: str) -> None:
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise InvalidInput("synchronous", synchronous, "expected OFF, NORMAL, FULL or EXTRA")
        self.path = path if path == MEMORY else os.path.abspath(path)
        self._busy_ms = int(busy_timeout * 1000)
        self._synchronous = synchronous.upper()
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self.closed = False
        # `:memory:` is one connection shared under this lock; files use one per thread.
        self._shared_lock: threading.RLock | None = threading.RLock() if path == MEMORY else None
        self._shared: sqlite3.Connection | None = None
        self.wakeups = Wakeups() if path == MEMORY else Wakeups.for_path(self.path)
        self._write_lock: WriterLock | threading.RLock = (
            threading.RLock() if path == MEMORY else writer_lock.for_path(self.path)
        )
        self._in_unit = threading.local()  # `.active` on the thread running units of work
        self._group = GroupCommit(self._run_units)

    # Connections and transactions

    def _connect(self, synchronous: str | None = None) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_ms / 1000,
                isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
                check_same_thread=False,  # close() closes every thread's connection
            )
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            if self.path != MEMORY:
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {synchronous or self._synchronous}")
            # Off by default in SQLite, per connection: the schema's REFERENCES hold here as
            # they do on PostgreSQL (a tenant's tokens and keys, an invoice's attempts).
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open SQLite database {self.path}: {exc}") from exc
        with self._all_lock:
            self._all.append(conn)
        return conn

    def own_connection(self, synchronous: str) -> sqlite3.Connection | None:
        """A connection apart from the threads' (closed by `close_connection` or `close`);
        None for `:memory:`, whose one connection is the database."""
        return None if self.path == MEMORY else self._connect(synchronous)

    def close_connection(self, conn: sqlite3.Connection | None) -> None:
        if conn is not None:
            _forget(self._all, self._all_lock, conn)

    def open_connections(self) -> int:
        """How many connections this dialect holds open (every thread's and own ones)."""
        with self._all_lock:
            return len(self._all)

    @contextmanager
    def connection(self, own: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """This thread's connection (or `own`, from `own_connection`), outside any transaction,
        SQLite errors raised as `StorageError`."""
        if self.closed:
            raise StorageError("the store is closed")
        try:
            if own is not None:
                yield own
            elif self._shared_lock is not None:
                with self._shared_lock:
                    if self._shared is None:
                        self._shared = self._connect()
                    yield self._shared
            else:
                holder: _ThreadConnection | None = getattr(self._local, "holder", None)
                if holder is None:
                    holder = self._local.holder = _ThreadConnection(self._connect())
                    # When the thread ends, its thread-local holder goes, and so does the
                    # connection (thread pools come and go in long-lived processes).
                    weakref.finalize(holder, _forget, self._all, self._all_lock, holder.conn)
                yield holder.conn
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite: {exc}") from exc

    @contextmanager
    def transaction(self, own: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction that holds the write lock from its first statement (on this
        thread's connection, or `own`); on this thread's connection inside a unit of work
        (`atomically`), a savepoint of the unit's transaction."""
        if own is None and getattr(self._in_unit, "active", False):
            with self.connection() as conn, savepoint(conn, "nested"):
                yield conn
            return
        if not self._write_lock.acquire(timeout=self._busy_ms / 1000):
            raise StorageError("SQLite: database is locked (by other writers)")
        try:
            with self.connection(own) as conn:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    # SQLite may have rolled back already (a failed COMMIT, a full disk).
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        finally:
            self._write_lock.release()

    def read(self) -> AbstractContextManager[sqlite3.Connection]:
        """This thread's connection, outside any transaction (autocommit reads). SQLite errors
        inside the block become `StorageError`."""
        return self.connection()

    def write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One `BEGIN IMMEDIATE` write transaction on this thread's connection, committed when
        the block ends and rolled back if it raises."""
        return self.transaction()

    @contextmanager
    def statement_write(self) -> Iterator[sqlite3.Connection]:
        """`write()` for a write that is one statement, except inside a unit of work: there,
        the unit's transaction without a savepoint, as on PostgreSQL. One statement needs none
        (SQLite undoes a failed statement's changes, and the transaction goes on), and the
        two statements of a savepoint cost as much as a small write."""
        if getattr(self._in_unit, "active", False):
            with self.connection() as conn:
                yield conn
            return
        with self.transaction() as conn:
            yield conn

    statement_read = read

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A deferred read transaction: in WAL mode its statements read the database as it
        was at the first one, while writers go on."""
        with self.connection() as conn:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")  # nothing written: ends the read

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run `fn`, whose writes (and reads) go through this dialect, as one transaction:
        committed when it returns, undone if it raises. Units that threads submit at the same
        time share one transaction and one fsync (`group_commit`); each still commits or fails
        alone, and returns only once it is durable. `fn` runs on whichever thread leads the
        group: it must touch no other store and not depend on its thread. Inside a unit, a
        nested `atomically` is part of it."""
        if getattr(self._in_unit, "active", False):
            return fn()
        return self._group.run(fn)

    def _run_units(self, units: Sequence[Unit[Any]]) -> None:
        try:
            with self.transaction() as conn:
                self._in_unit.active = True
                try:
                    if len(units) == 1:
                        # Alone in its transaction, a unit needs no savepoint: its failure
                        # rolls the transaction back (two statements fewer per unit).
                        units[0].value = units[0].fn()
                    else:
                        for unit in units:
                            run_unit(conn, unit)
                finally:
                    self._in_unit.active = False
        except BaseException as exc:
            # BEGIN or COMMIT failed (or a unit alone in its transaction): nothing of the
            # group is stored; each unit says so.
            for unit in units:
                unit.value = None
                unit.error = exc if unit is units[0] else StorageError(str(exc))

    def close(self) -> None:
        self.closed = True
        with self._all_lock:
            for conn in self._all:
                conn.close()
            self._all.clear()

    # Values and statements

    @staticmethod
    def encode_bool(value: bool, /) -> int:
        return int(value)

    @staticmethod
    def encode_texts(values: Sequence[str], /) -> str:
        return json.dumps(list(values))  # read back with json_each

    @staticmethod
    def plan_queue(conn: sqlite3.Connection, /) -> None:
        """Nothing: the write lock is the plan (SQLite's planner needs no pinning)."""

    @staticmethod
    def execute_batch(
        conn: sqlite3.Connection, query: str, params: Mapping[str, Any], /
    ) -> sqlite3.Cursor:
        return conn.execute(query, params)

    @staticmethod
    def read_clock(conn: sqlite3.Connection, /) -> datetime:
        # The machine's clock, which SQLite's own 'now' reads too (to the millisecond only):
        # every process on the file shares it, whatever clock a worker was given.
        return datetime.now(UTC)

    def wake_workers(self, conn: sqlite3.Connection, /) -> None:
        # Other processes' idle waiters poll this counter (see `SqliteQueue.wait_for_notify`).
        conn.execute(QUERIES["bump_wakeups"])

    def jobs_inserted(self) -> None:
        self.wakeups.notify()


__all__ = ["BUSY_TIMEOUT", "MEMORY", "QUERIES", "SqliteDialect", "Wakeups"]
