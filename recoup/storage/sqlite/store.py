"""The SQLite backend: the embedded default, safe for several threads and processes on one
machine.

- WAL journal (readers never block the writer) and a busy timeout (writers queue instead of
  failing at once); every write is one `BEGIN IMMEDIATE` transaction, so a claim takes the write
  lock before it reads and two claimers can never pick the same job.
- One connection per thread (`sqlite3` connections are not meant to be shared across threads);
  `:memory:` databases are the exception: one connection guarded by a lock, since each new
  connection to `:memory:` would be a different, empty database.
- Instants are INTEGER microseconds since the Unix epoch in UTC: exact, compact and ordered as
  integers (see `0001_init.sql`).
- The worker's hot path (claims, completions, heartbeats, releases, rescues, waiting for new
  jobs) is `SqliteQueue`, in `queue.py`, and worker sessions (a heartbeat row per running
  worker) are `SqliteWorkers`, in `workers.py`; this module opens the database, migrates it,
  inserts and cancels jobs.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from recoup.errors import InvalidInput, StorageError
from recoup.jobs.model import Job, NewJob
from recoup.storage import job_rows, row_decoding
from recoup.storage.change_tables import SqlChangeTables
from recoup.storage.dead_letters import SqlDeadLetters
from recoup.storage.dunning_reports import SqlDunningReports
from recoup.storage.dunning_tables import EXPANSIONS, SqlDunningTables
from recoup.storage.hosted_tables import SqlHostedTables
from recoup.storage.intake_tables import SqlIntakeTables
from recoup.storage.job_rows import from_micros, micros
from recoup.storage.rules import insert_conflict
from recoup.storage.sql_files import Migration, load_migrations, load_queries
from recoup.storage.sqlite.group_commit import GroupCommit, Unit, run_unit, savepoint
from recoup.storage.sqlite.queue import MEMORY, SqliteQueue, Wakeups
from recoup.storage.sqlite.workers import SqliteWorkers
from recoup.storage.tenant_tables import SqlTenantTables

if TYPE_CHECKING:
    from recoup.storage.protocol import ApiTables

T = TypeVar("T")

Q = load_queries("recoup.storage.sqlite")
DQ = load_queries("recoup.storage.sqlite", "dunning_queries.sql", EXPANSIONS)
TQ = load_queries("recoup.storage.sqlite", "tenant_queries.sql")
IQ = load_queries("recoup.storage.sqlite", "intake_queries.sql")
HQ = load_queries("recoup.storage.sqlite", "hosted_queries.sql")

BUSY_TIMEOUT = 10.0  # seconds a writer waits for the write lock before giving up

# One in-process lock per database file, taken around every write transaction. Threads of one
# process then queue for SQLite's write lock on a Python lock, each woken the moment the one
# before commits, instead of in SQLite's busy handler, which sleeps 1, 2, 5 … 100 ms between
# tries: under 16 concurrent API requests that sleeping made the p99 of a job's creation 700 ms.
# Other processes still meet at SQLite's own lock (busy_timeout). Re-entrant, so that a
# nested write on one thread fails as before (SQLite refuses the nested BEGIN), not deadlocks.
_WRITE_LOCKS: dict[str, threading.RLock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _write_lock(path: str) -> threading.RLock:
    with _WRITE_LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(path, threading.RLock())


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


class SqliteStore(
    SqliteQueue,
    SqliteWorkers,
    SqlDunningTables,
    SqlDunningReports,
    SqlTenantTables,
    SqlIntakeTables,
    SqlDeadLetters,
    SqlChangeTables,
):
    """Every store protocol (`recoup.storage.Store`) on one SQLite file (or `:memory:`)."""

    backend = "sqlite"
    migrations_package = "recoup.storage.sqlite.migrations"
    Q = Q
    DQ = DQ
    TQ = TQ
    IQ = IQ
    _encode_instant = staticmethod(micros)
    _row_instant = staticmethod(micros)
    _decode_instant = staticmethod(from_micros)

    def __init__(
        self,
        path: str,
        *,
        migrate: bool = True,
        busy_timeout: float = BUSY_TIMEOUT,
        synchronous: str = "FULL",
    ) -> None:
        """`synchronous="NORMAL"` trades the last commits on power loss (never on a process
        crash) for fewer fsyncs; FULL is the default because a lost insert is a lost job."""
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise InvalidInput("synchronous", synchronous, "expected OFF, NORMAL, FULL or EXTRA")
        self.path = path if path == MEMORY else os.path.abspath(path)
        self._busy_ms = int(busy_timeout * 1000)
        self._synchronous = synchronous.upper()
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._closed = False
        # `:memory:` is one connection shared under this lock; files use one per thread.
        self._shared_lock: threading.RLock | None = threading.RLock() if path == MEMORY else None
        self._shared: sqlite3.Connection | None = None
        self._wakeups = Wakeups() if path == MEMORY else Wakeups.for_path(self.path)
        self._write_lock = threading.RLock() if path == MEMORY else _write_lock(self.path)
        self._in_unit = threading.local()  # `.active` on the thread running units of work
        self._group = GroupCommit(self._run_units)
        self.hosted = SqlHostedTables(
            read=self.read,
            write=self.write,
            encode_instant=micros,
            decode_instant=from_micros,
            queries=HQ,
        )
        if migrate:
            self.migrate()

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

    def _own_connection(self, synchronous: str) -> sqlite3.Connection | None:
        """A connection apart from the threads' (closed by `_close_connection` or `close`);
        None for `:memory:`, whose one connection is the database."""
        return None if self.path == MEMORY else self._connect(synchronous)

    def _close_connection(self, conn: sqlite3.Connection | None) -> None:
        if conn is not None:
            _forget(self._all, self._all_lock, conn)

    @contextmanager
    def _connection(self, own: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """This thread's connection (or `own`, from `_own_connection`), SQLite errors raised
        as `StorageError`."""
        if self._closed:
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
    def _write(self, own: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction that holds the write lock from its first statement (on this
        thread's connection, or `own`); on this thread's connection inside a unit of work
        (`atomically`), a savepoint of the unit's transaction."""
        if own is None and getattr(self._in_unit, "active", False):
            with self._connection() as conn, savepoint(conn, "nested"):
                yield conn
            return
        if not self._write_lock.acquire(timeout=self._busy_ms / 1000):
            raise StorageError("SQLite: database is locked (by this process's other writers)")
        try:
            with self._connection(own) as conn:
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
        """This thread's connection, outside any transaction (autocommit reads), for the other
        table modules of this backend (`api_tables`) that live in the same database. SQLite
        errors inside the block become `StorageError`."""
        return self._connection()

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """A deferred read transaction: in WAL mode its statements read the database as it
        was at the first one, while writers go on."""
        with self._connection() as conn:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")  # nothing written: ends the read

    def write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One `BEGIN IMMEDIATE` write transaction on this thread's connection, committed when
        the block ends and rolled back if it raises: the same write lock, busy timeout and error
        translation as the job store's own writes, for this backend's other table modules."""
        return self._write()

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run `fn`, whose writes (and reads) go through this store, as one transaction:
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
            with self._write() as conn:
                self._in_unit.active = True
                try:
                    for unit in units:
                        run_unit(conn, unit)
                finally:
                    self._in_unit.active = False
        except BaseException as exc:
            # BEGIN or COMMIT failed: nothing of the group is stored; each unit says so.
            for unit in units:
                unit.value = None
                unit.error = exc if unit is units[0] else StorageError(str(exc))

    @staticmethod
    def _encode_bool(value: bool) -> int:
        return int(value)

    @staticmethod
    def _encode_texts(values: Sequence[str]) -> str:
        return json.dumps(list(values))  # read back with json_each

    def _prepare_jobs(self, jobs: Sequence[NewJob], now: datetime) -> list[tuple[Any, ...]]:
        # Encoded before the write transaction, so that the write lock is held the shorter.
        encoder = job_rows.JobEncoder(micros)
        now_us = micros(now)
        return [encoder.row(job, now_us) for job in jobs]

    def _insert_prepared(
        self, conn: sqlite3.Connection, prepared: Sequence[Any], now: datetime
    ) -> int:
        return self._insert_rows(conn, list(prepared))

    def _jobs_inserted(self) -> None:
        self._wakeups.notify()

    def _wake_workers(self, conn: sqlite3.Connection) -> None:
        conn.execute(Q["bump_wakeups"])

    def api_tables(self) -> ApiTables:
        from recoup.storage.sqlite.api_tables import SqliteApiTables

        return SqliteApiTables(self)

    def close(self) -> None:
        self._closed = True
        with self._all_lock:
            for conn in self._all:
                conn.close()
            self._all.clear()

    # Migrations

    def migrate(self) -> int:
        with self._connection() as conn:
            conn.execute(Q["create_schema_version"])
            # Off while migrating (it cannot change inside a transaction): a migration that
            # makes a table again to change its CHECKs drops the table its children refer to.
            # Each migration checks every reference before it commits (`_apply`).
            conn.execute("PRAGMA foreign_keys = OFF")
            try:
                for migration in load_migrations(self.migrations_package):
                    self._apply(conn, migration)
            finally:
                conn.execute("PRAGMA foreign_keys = ON")
            version: int = conn.execute(Q["schema_version"]).fetchone()[0]
            return version

    def schema_version(self) -> int:
        """The version in force; 0 for a database never migrated."""
        with self._connection() as conn:
            if not conn.execute(Q["has_schema_version"]).fetchone()[0]:
                return 0
            version: int = conn.execute(Q["schema_version"]).fetchone()[0]
            return version

    @staticmethod
    def _apply(conn: sqlite3.Connection, migration: Migration) -> None:
        # Each migration is one transaction; re-reading the version under the write lock makes
        # two processes starting at once apply it once.
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute(Q["schema_version"]).fetchone()[0] >= migration.version:
                conn.execute("ROLLBACK")
                return
            for statement in _statements(migration.sql):
                conn.execute(statement)
            broken = conn.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise StorageError(
                    f"migration {migration.version} ({migration.name}) would break"
                    f" {len(broken)} references, first {tuple(broken[0])}: nothing changed"
                )
            conn.execute(
                Q["record_migration"],
                {"version": migration.version, "name": migration.name, "now": _now_us()},
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # Writing jobs

    def insert(self, job: NewJob, *, now: datetime) -> Job:
        values = job_rows.JobEncoder(micros).row(job, micros(now))
        with self._write() as conn:
            row = conn.execute(Q["insert_job"], values).fetchone()
            if row is None:
                if job.idempotency_key is not None:
                    found = conn.execute(
                        Q["get_job_by_idempotency_key"],
                        {"tenant": job.tenant, "key": job.idempotency_key},
                    ).fetchone()
                    if found is not None:
                        return row_decoding.job_from_row(found, from_micros)
                raise insert_conflict(conn, Q, job)
            conn.execute(Q["bump_wakeups"])
        self._wakeups.notify()
        return row_decoding.job_from_row(row, from_micros)

    def insert_many(self, jobs: Sequence[NewJob], *, now: datetime) -> int:
        if not jobs:
            return 0
        encoder = job_rows.JobEncoder(micros)
        now_us = micros(now)
        rows = [encoder.row(job, now_us) for job in jobs]
        with self._write() as conn:
            inserted = self._insert_rows(conn, rows)
        if inserted:
            self._wakeups.notify()
        return inserted

    @staticmethod
    def _insert_rows(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> int:
        before = conn.total_changes
        conn.executemany(Q["insert_job_quietly"], rows)
        inserted = conn.total_changes - before
        if inserted:
            # Other processes' idle waiters poll this counter (see wait_for_notify).
            conn.execute(Q["bump_wakeups"])
        return inserted

    # Cancelling

    def cancel(self, tenant: str, job_id: str, *, now: datetime, begun: bool = True) -> Job | None:
        query = Q["cancel_job" if begun else "cancel_unbegun_job"]
        with self._write() as conn:
            conn.execute(query, {"tenant": tenant, "id": job_id, "now": micros(now)})
            row = conn.execute(Q["get_job"], {"tenant": tenant, "id": job_id}).fetchone()
        return None if row is None else row_decoding.job_from_row(row, from_micros)


def _now_us() -> int:
    # Only for the bookkeeping column schema_version.applied_at.
    return time.time_ns() // 1000


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (`executescript` would commit our transaction)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer
            buffer = ""
    rest = "\n".join(
        line for line in buffer.splitlines() if line.strip() and not line.strip().startswith("--")
    )
    if rest.strip():
        raise ValueError(f"migration ends with an incomplete statement: {rest[:80]!r}")
