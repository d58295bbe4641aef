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
- `wait_for_notify` wakes at once for inserts made through any store on the same file in this
  process, and within `WAKE_POLL_INTERVAL` for inserts made by other processes (they bump a
  counter row that idle waiters poll: a read of one row, so polling costs next to nothing).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any

from recoup.errors import InvalidInput, StorageError
from recoup.jobs.model import (
    ERROR_LIMIT,
    RESPONSE_EXCERPT_LIMIT,
    Completion,
    Job,
    JobState,
    NewJob,
    Run,
    RunOutcome,
    Tenant,
)
from recoup.jobs.schedule_model import NewSchedule, Schedule
from recoup.jobs.store import ClaimParams, JobFilter, JobPage, PruneResult
from recoup.storage import _rows
from recoup.storage._common import (
    attempt_keys,
    check_page_limit,
    check_schedule_jobs,
    clip,
    insert_conflict,
    job_page,
    schedule_conflict,
    state_counts,
)
from recoup.storage._rows import FINAL_STATE_OF, LOST_ERROR, ONE_US, from_micros, micros
from recoup.storage._sql import Migration, load_migrations, load_queries

Q = load_queries("recoup.storage.sqlite")

BUSY_TIMEOUT = 10.0  # seconds a writer waits for the write lock before giving up
WAKE_POLL_INTERVAL = 0.05  # seconds between checks for inserts made by other processes
MEMORY = ":memory:"


class _Wakeups:
    """In-process wake-ups per database file: a counter and a condition."""

    _lock = threading.Lock()
    _by_path: dict[str, _Wakeups] = {}  # noqa: RUF012  (a registry shared by all instances)

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.generation = 0

    @classmethod
    def for_path(cls, path: str) -> _Wakeups:
        with cls._lock:
            found = cls._by_path.get(path)
            if found is None:
                found = cls._by_path[path] = cls()
            return found

    def notify(self) -> None:
        with self.condition:
            self.generation += 1
            self.condition.notify_all()


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


class SqliteStore:
    """JobStore and ScheduleStore on one SQLite file (or `:memory:`)."""

    backend = "sqlite"
    migrations_package = "recoup.storage.sqlite.migrations"

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
        self._wakeups = _Wakeups() if path == MEMORY else _Wakeups.for_path(self.path)
        if migrate:
            self.migrate()

    # Connections and transactions

    def _connect(self) -> sqlite3.Connection:
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
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open SQLite database {self.path}: {exc}") from exc
        with self._all_lock:
            self._all.append(conn)
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise StorageError("the store is closed")
        try:
            if self._shared_lock is not None:
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
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction that holds the write lock from its first statement."""
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                # SQLite may have rolled back already (a failed COMMIT, a full disk).
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def read(self) -> AbstractContextManager[sqlite3.Connection]:
        """This thread's connection, outside any transaction (autocommit reads), for the other
        table modules of this backend (`api_tables`) that live in the same database. SQLite
        errors inside the block become `StorageError`."""
        return self._connection()

    def write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One `BEGIN IMMEDIATE` write transaction on this thread's connection, committed when
        the block ends and rolled back if it raises: the same write lock, busy timeout and error
        translation as the job store's own writes, for this backend's other table modules."""
        return self._write()

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
            for migration in load_migrations(self.migrations_package):
                self._apply(conn, migration)
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
            conn.execute(
                Q["record_migration"],
                {"version": migration.version, "name": migration.name, "now": _now_us()},
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # Tenants

    def ensure_tenant(self, tenant: Tenant) -> Tenant:
        with self._write() as conn:
            conn.execute(
                Q["ensure_tenant"],
                {
                    "id": tenant.id,
                    "name": tenant.name,
                    "signing_secret": tenant.signing_secret,
                    "created_at": micros(tenant.created_at),
                },
            )
            row = conn.execute(Q["get_tenant"], {"id": tenant.id}).fetchone()
        return _rows.tenant_from_row(row, from_micros)

    def get_tenant(self, tenant_id: str) -> Tenant | None:
        with self._connection() as conn:
            row = conn.execute(Q["get_tenant"], {"id": tenant_id}).fetchone()
        return None if row is None else _rows.tenant_from_row(row, from_micros)

    # Writing jobs

    def insert(self, job: NewJob, *, now: datetime) -> Job:
        values = _rows.JobEncoder(micros).row(job, micros(now))
        with self._write() as conn:
            row = conn.execute(Q["insert_job"], values).fetchone()
            if row is None:
                if job.idempotency_key is not None:
                    found = conn.execute(
                        Q["get_job_by_idempotency_key"],
                        {"tenant": job.tenant, "key": job.idempotency_key},
                    ).fetchone()
                    if found is not None:
                        return _rows.job_from_row(found, from_micros)
                raise insert_conflict(conn, Q, job)
            conn.execute(Q["bump_wakeups"])
        self._wakeups.notify()
        return _rows.job_from_row(row, from_micros)

    def insert_many(self, jobs: Sequence[NewJob], *, now: datetime) -> int:
        if not jobs:
            return 0
        encoder = _rows.JobEncoder(micros)
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

    # The worker's side

    def claim_due(self, params: ClaimParams) -> list[Job]:
        if params.limit <= 0:
            return []
        now = micros(params.now)
        with self._write() as conn:
            rows = conn.execute(
                Q["claim_due"],
                {
                    "worker_id": params.worker_id,
                    "now": now,
                    "until": now + params.horizon // ONE_US,
                    "lease": params.lease // ONE_US,
                    "limit": params.limit,
                },
            ).fetchall()
        jobs = [_rows.job_from_row(row, from_micros) for row in rows]
        jobs.sort(key=lambda job: (job.run_at, job.id))
        return jobs

    def complete_many(self, completions: Sequence[Completion], *, now: datetime) -> list[str]:
        if not completions:
            return []
        now_us = micros(now)
        applied: list[str] = []
        runs: list[tuple[Any, ...]] = []
        with self._write() as conn:
            for completion in completions:
                run = completion.run
                retry = _rows.outcome_is_retry(run.outcome)
                retry_at = completion.retry_at if completion.retry_at is not None else now
                key = {"id": run.job_id, "worker_id": completion.worker_id, "attempt": run.attempt}
                row = conn.execute(
                    Q["complete_job"],
                    {
                        **key,
                        "retry": retry,
                        "final_state": FINAL_STATE_OF[run.outcome].value,
                        "retry_at": micros(retry_at),
                        "error": clip(run.error, ERROR_LIMIT),
                        "now": now_us,
                    },
                ).fetchone()
                if row is not None:
                    applied.append(run.job_id)
                    outcome = run.outcome
                    if retry and row[0] == JobState.FAILED:
                        outcome = RunOutcome.FAILED  # attempts spent: no further attempt
                    runs.append(_run_values(run, outcome))
                elif conn.execute(Q["was_cancelled_during_attempt"], key).fetchone():
                    # Cancelled while this attempt ran: the attempt happened, so log it, but
                    # leave the job cancelled.
                    runs.append(_run_values(run, RunOutcome.CANCELLED))
            conn.executemany(Q["insert_run"], runs)
        return applied

    def heartbeat(
        self,
        worker_id: str,
        job_ids: Sequence[str],
        *,
        lease_until: datetime,
        attempts: Sequence[int] | None = None,
    ) -> list[str]:
        if not job_ids:
            return []
        keys = attempt_keys(job_ids, attempts)
        with self._write() as conn:
            rows = conn.execute(
                Q["heartbeat"],
                {
                    "ids": json.dumps(list(job_ids)),
                    "keys": None if keys is None else json.dumps(keys),
                    "worker_id": worker_id,
                    "lease_until": micros(lease_until),
                },
            ).fetchall()
        return [row[0] for row in rows]

    def release(self, worker_id: str, job_ids: Sequence[str], *, now: datetime) -> int:
        if not job_ids:
            return 0
        with self._write() as conn:
            cursor = conn.execute(
                Q["release"],
                {"ids": json.dumps(list(job_ids)), "worker_id": worker_id, "now": micros(now)},
            )
            released = cursor.rowcount
            if released:
                conn.execute(Q["bump_wakeups"])
        if released:
            self._wakeups.notify()
        return released

    def rescue_expired(self, *, now: datetime, limit: int = 1000) -> list[str]:
        now_us = micros(now)
        rescued: list[str] = []
        with self._write() as conn:
            expired = conn.execute(Q["expired_leases"], {"now": now_us, "limit": limit}).fetchall()
            runs = []
            for job_id, tenant, attempt, started_us, worker in expired:
                error = LOST_ERROR.format(worker=worker)
                conn.execute(Q["rescue_job"], {"id": job_id, "now": now_us, "error": error})
                rescued.append(job_id)
                runs.append(
                    (
                        job_id,
                        tenant,
                        attempt,
                        min(started_us, now_us),
                        now_us,
                        RunOutcome.LOST.value,
                        None,
                        max(0, now_us - started_us) / 1000,
                        None,
                        error,
                        worker,
                    )
                )
            conn.executemany(Q["insert_run"], runs)
            if rescued:
                conn.execute(Q["bump_wakeups"])
        if rescued:
            self._wakeups.notify()
        return rescued

    def next_due_at(self) -> datetime | None:
        with self._connection() as conn:
            value = conn.execute(Q["next_due_at"]).fetchone()[0]
        return None if value is None else from_micros(value)

    def due_backlog(self, now: datetime) -> int:
        with self._connection() as conn:
            count: int = conn.execute(Q["due_backlog"], {"now": micros(now)}).fetchone()[0]
        return count

    def wait_for_notify(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True as soon as jobs were inserted (or released or
        rescued) through any store on this database, False on timeout or once the store is
        closed (within `WAKE_POLL_INTERVAL`)."""
        deadline = time.monotonic() + max(0.0, timeout)
        wakeups = self._wakeups
        with wakeups.condition:
            generation = wakeups.generation
        seq = self._wake_seq()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed:
                return False
            with wakeups.condition:
                if wakeups.condition.wait_for(
                    lambda: wakeups.generation != generation,
                    timeout=min(remaining, WAKE_POLL_INTERVAL),
                ):
                    return True
            if self.path == MEMORY:
                continue
            try:
                if self._wake_seq() != seq:
                    return True
            except StorageError:
                if self._closed:  # closed from another thread while we polled
                    return False
                raise

    def _wake_seq(self) -> int:
        with self._connection() as conn:
            seq: int = conn.execute(Q["wake_seq"]).fetchone()[0]
            return seq

    # Cancelling

    def cancel(self, tenant: str, job_id: str, *, now: datetime) -> Job | None:
        with self._write() as conn:
            conn.execute(Q["cancel_job"], {"tenant": tenant, "id": job_id, "now": micros(now)})
            row = conn.execute(Q["get_job"], {"tenant": tenant, "id": job_id}).fetchone()
        return None if row is None else _rows.job_from_row(row, from_micros)

    def cancel_by_name(self, tenant: str, name: str, *, now: datetime) -> int:
        with self._write() as conn:
            cursor = conn.execute(
                Q["cancel_by_name"], {"tenant": tenant, "name": name, "now": micros(now)}
            )
            return cursor.rowcount

    def cancel_by_prefix(self, tenant: str, prefix: str, *, now: datetime) -> int:
        if not prefix:
            raise InvalidInput("prefix", prefix, "expected a non-empty name prefix")
        with self._write() as conn:
            cursor = conn.execute(
                Q["cancel_by_prefix"], {"tenant": tenant, "prefix": prefix, "now": micros(now)}
            )
            return cursor.rowcount

    # Reading

    def get(self, tenant: str, job_id: str) -> Job | None:
        with self._connection() as conn:
            row = conn.execute(Q["get_job"], {"tenant": tenant, "id": job_id}).fetchone()
        return None if row is None else _rows.job_from_row(row, from_micros)

    def get_by_name(self, tenant: str, name: str) -> Job | None:
        with self._connection() as conn:
            params = {"tenant": tenant, "name": name}
            row = conn.execute(Q["get_live_job_by_name"], params).fetchone()
            if row is None:
                row = conn.execute(Q["get_latest_job_by_name"], params).fetchone()
        return None if row is None else _rows.job_from_row(row, from_micros)

    def list_jobs(self, query: JobFilter) -> JobPage:
        check_page_limit(query.limit)
        cursor_created: int | None = None
        cursor_id: str | None = None
        if query.cursor is not None:
            created, cursor_id = _rows.decode_cursor(query.cursor)
            cursor_created = micros(created)
        with self._connection() as conn:
            rows = conn.execute(
                Q["list_jobs"],
                {
                    "tenant": query.tenant,
                    "state": None if query.state is None else query.state.value,
                    "prefix": query.name_prefix,
                    "schedule_id": query.schedule_id,
                    "cursor_created": cursor_created,
                    "cursor_id": cursor_id,
                    "limit": query.limit + 1,  # one more says whether a next page exists
                },
            ).fetchall()
        return job_page(rows, query.limit, lambda row: _rows.job_from_row(row, from_micros))

    def runs(self, tenant: str, job_id: str) -> list[Run]:
        with self._connection() as conn:
            rows = conn.execute(Q["runs"], {"tenant": tenant, "job_id": job_id}).fetchall()
        return [_rows.run_from_row(row, from_micros) for row in rows]

    def count_by_state(self, tenant: str | None = None) -> dict[JobState, int]:
        with self._connection() as conn:
            if tenant is None:
                rows = conn.execute(Q["count_by_state"]).fetchall()
            else:
                rows = conn.execute(Q["count_by_state_of_tenant"], {"tenant": tenant}).fetchall()
        return state_counts(rows)

    def count_live(self) -> dict[JobState, int]:
        with self._connection() as conn:
            rows = conn.execute(Q["count_live"]).fetchall()
        return {JobState(state): int(count) for state, count in rows}

    # Retention

    def prune(self, *, now: datetime, keep_runs_for: timedelta, limit: int = 10_000) -> PruneResult:
        """Deletes at most `limit` jobs and `limit` runs, each batch its own short transaction
        (so pruning never holds the write lock for long); call again while a count equals
        `limit`."""
        now_us = micros(now)
        with self._write() as conn:
            jobs = conn.execute(Q["prune_jobs"], {"now": now_us, "limit": limit}).rowcount
        with self._write() as conn:
            runs = conn.execute(
                Q["prune_runs"],
                {"before": micros(now - keep_runs_for), "limit": limit},
            ).rowcount
        return PruneResult(jobs=jobs, runs=runs)

    # Schedules

    def insert_schedule(
        self, schedule: NewSchedule, *, next_fire_at: datetime | None, now: datetime
    ) -> Schedule:
        values = _rows.schedule_values(schedule, next_fire_at=next_fire_at, now=now, instant=micros)
        with self._write() as conn:
            row = conn.execute(Q["insert_schedule"], values).fetchone()
        if row is None:
            raise schedule_conflict(schedule)
        return _rows.schedule_from_row(row, from_micros)

    def get_schedule(self, tenant: str, schedule_id: str) -> Schedule | None:
        """Deleted schedules are returned too, with `deleted=True` (their jobs still name them)."""
        with self._connection() as conn:
            row = conn.execute(Q["get_schedule"], {"tenant": tenant, "id": schedule_id}).fetchone()
        return None if row is None else _rows.schedule_from_row(row, from_micros)

    def list_schedules(self, tenant: str) -> list[Schedule]:
        with self._connection() as conn:
            rows = conn.execute(Q["list_schedules"], {"tenant": tenant}).fetchall()
        return [_rows.schedule_from_row(row, from_micros) for row in rows]

    def set_schedule_paused(
        self,
        tenant: str,
        schedule_id: str,
        *,
        paused: bool,
        now: datetime,
        next_fire_at: datetime | None = None,
    ) -> Schedule | None:
        with self._write() as conn:
            row = conn.execute(
                Q["set_schedule_paused"],
                {
                    "tenant": tenant,
                    "id": schedule_id,
                    "paused": int(paused),
                    "next_fire_at": None if next_fire_at is None else micros(next_fire_at),
                    "now": micros(now),
                },
            ).fetchone()
        return None if row is None else _rows.schedule_from_row(row, from_micros)

    def delete_schedule(self, tenant: str, schedule_id: str, *, now: datetime) -> bool:
        now_us = micros(now)
        with self._write() as conn:
            deleted = conn.execute(
                Q["delete_schedule"], {"tenant": tenant, "id": schedule_id, "now": now_us}
            ).rowcount
            if deleted:
                conn.execute(Q["cancel_schedule_jobs"], {"schedule_id": schedule_id, "now": now_us})
        return bool(deleted)

    def due_schedules(self, *, now: datetime, horizon: timedelta, limit: int) -> list[Schedule]:
        with self._connection() as conn:
            rows = conn.execute(
                Q["due_schedules"], {"until": micros(now + horizon), "limit": limit}
            ).fetchall()
        return [_rows.schedule_from_row(row, from_micros) for row in rows]

    def advance_schedule(
        self,
        schedule_id: str,
        *,
        expected_next: datetime,
        new_next: datetime | None,
        jobs: Sequence[NewJob],
        now: datetime,
    ) -> bool:
        check_schedule_jobs(schedule_id, jobs)
        now_us = micros(now)
        encoder = _rows.JobEncoder(micros)
        rows = [encoder.row(job, now_us) for job in jobs]
        with self._write() as conn:
            advanced = conn.execute(
                Q["advance_schedule"],
                {
                    "id": schedule_id,
                    "expected_next": micros(expected_next),
                    "new_next": None if new_next is None else micros(new_next),
                    "now": now_us,
                },
            ).rowcount
            if not advanced:
                return False
            inserted = self._insert_rows(conn, rows) if rows else 0
        if inserted:
            self._wakeups.notify()
        return True


def _run_values(run: Run, outcome: RunOutcome) -> tuple[Any, ...]:
    return (
        run.job_id,
        run.tenant,
        run.attempt,
        micros(run.started_at),
        micros(run.finished_at),
        outcome.value,
        run.status_code,
        max(0.0, run.duration_ms),
        clip(run.response_excerpt, RESPONSE_EXCERPT_LIMIT),
        clip(run.error, ERROR_LIMIT),
        run.worker_id,
    )


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
