"""The PostgreSQL backend: production, many API servers and workers on many hosts.

- psycopg 3 with a `psycopg_pool.ConnectionPool`; every connection runs with `search_path` set
  to the store's schema (default "recoup", created if missing) and `TimeZone` UTC, so the SQL in
  `queries.sql` and the migrations never name a schema.
- Claims lock a batch with `FOR UPDATE SKIP LOCKED` over the partial index of due jobs;
  completions (with their run-log rows), heartbeats and rescues are one statement per batch.
  Queue statements pin index-driven plans for their transaction (`queue_plans` in
  queries.sql), so their cost follows the batch, not the table, even on stale statistics.
- Bulk inserts COPY (binary) straight into jobs; a batch that clashes (live name, idempotency
  key, occurrence, id) is COPied again into a per-session staging table and moved with `INSERT
  … SELECT … ON CONFLICT DO NOTHING`. Batches under `COPY_THRESHOLD` rows are one `unnest`
  INSERT.
- Batch statements (claims, completions, heartbeats, rescues, listings, pruning) run with
  `prepare=False`: psycopg would otherwise switch them to a prepared generic plan after five
  runs, which cannot see the array sizes or which optional filters are NULL, and may scan a
  whole index where the planned-each-time version looks ids up in the primary key.
- An AFTER INSERT statement trigger sends one `pg_notify('<schema>_jobs', earliest run_at)` per
  inserting statement; `wait_for_notify` LISTENs on a dedicated connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import AdaptersMap, Loader
from psycopg.pq import Format
from psycopg_pool import ConnectionPool, PoolTimeout

from recoup.errors import InvalidInput, StorageError
from recoup.jobs.model import (
    ERROR_LIMIT,
    RESPONSE_EXCERPT_LIMIT,
    Completion,
    Job,
    NewJob,
)
from recoup.jobs.store import ClaimParams
from recoup.storage import SCHEMA_NAME_ALLOWED, job_rows, redact_url, valid_schema_name
from recoup.storage.dunning_tables import EXPANSIONS, SqlDunningTables
from recoup.storage.job_rows import aware_utc
from recoup.storage.rules import (
    FINAL_STATE_OF,
    attempt_keys,
    clip,
    insert_conflict,
    latest_completions,
    outcome_is_retry,
)
from recoup.storage.sql_files import Migration, load_migrations, load_queries

if TYPE_CHECKING:
    from recoup.storage.protocol import ApiTables

Q = load_queries("recoup.storage.postgres")
DQ = load_queries("recoup.storage.postgres", "dunning_queries.sql", EXPANSIONS)

DEFAULT_SCHEMA = "recoup"
POOL_TIMEOUT = 30.0  # seconds to wait for a free pooled connection
CONNECT_TIMEOUT = 10  # seconds to establish one connection
PROBE_TIMEOUT = 5  # seconds for the one connection tried before the pool opens
LISTEN_SLICE = 0.25  # seconds: how long `close` may wait for a waiting `wait_for_notify`
COPY_THRESHOLD = 16  # rows from which insert_many uses COPY (measured: COPY wins from ~20)
# Taken while migrating, so that stores starting at once apply each migration once.
_MIGRATION_LOCK_KEY = 0x7265636F7570  # "recoup"

# Binary COPY types in INSERT_COLUMNS order; the JSON columns arrive already in jsonb's wire
# format, so they go through as bytes.
_COPY_TYPES = [
    "text",  # id
    "text",  # tenant
    "text",  # name
    "timestamptz",  # run_at
    "bytea",  # target (jsonb wire format)
    "bytea",  # payload (jsonb wire format)
    "text",  # idempotency_key
    "int4",  # max_attempts
    "float8",  # min_backoff_s
    "float8",  # max_backoff_s
    "bool",  # jitter
    "float8",  # timeout_s
    "float8",  # keep_for_s
    "text",  # schedule_id
    "text",  # job_group
    "timestamptz",  # occurrence_at
    "timestamptz",  # created_at
    "timestamptz",  # updated_at
]


class _JsonbTextLoader(Loader):
    """jsonb as its JSON text, for `job_rows` to decode (or look up: targets repeat) itself, as it
    does SQLite's JSON text. (psycopg's own loader would hand back a decoded value, which
    `job_rows` cannot tell from JSON text when it is a string.)"""

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


class PostgresStore(SqlDunningTables):
    """Every store protocol (`recoup.storage.Store`) on PostgreSQL, every table in `schema`."""

    backend = "postgresql"
    migrations_package = "recoup.storage.postgres.migrations"
    Q = Q
    DQ = DQ
    _row_instant = staticmethod(aware_utc)
    _decode_instant = staticmethod(aware_utc)

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        migrate: bool = True,
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        if not valid_schema_name(schema):
            raise InvalidInput("schema", schema, SCHEMA_NAME_ALLOWED)
        self.url = url
        self.schema: str = schema
        self.channel = f"{schema}_jobs"
        self._listener: psycopg.Connection[Any] | None = None
        self._listener_lock = threading.Lock()
        self._closing = False
        self._probe(url)
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=POOL_TIMEOUT,
            kwargs=self._connect_kwargs(),
            open=False,
            name=f"recoup-{schema}",
        )
        try:
            self._pool.open(wait=True, timeout=POOL_TIMEOUT)
        except PoolTimeout as exc:
            self._pool.close()
            raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc
        if migrate:
            try:
                self.migrate()
            except BaseException:
                self.close()
                raise

    def _probe(self, url: str) -> None:
        """Connect once, with a short timeout, before opening the pool: an unreachable or
        refusing server is one clear `StorageError` naming the URL (password hidden) within
        `PROBE_TIMEOUT`, not `POOL_TIMEOUT` of pool retries and their warnings."""
        kwargs = {**self._connect_kwargs(), "connect_timeout": PROBE_TIMEOUT}
        try:
            psycopg.connect(url, **kwargs).close()
        except psycopg.Error as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            reason = lines[0] if lines else type(exc).__name__
            raise StorageError(
                f"cannot connect to PostgreSQL at {redact_url(url)}: {reason}"
            ) from None

    def _connect_kwargs(self) -> dict[str, Any]:
        return {
            "options": f"-c search_path={self.schema} -c TimeZone=UTC",
            "connect_timeout": CONNECT_TIMEOUT,
            "context": _ADAPTERS,
        }

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in a transaction, committed on success."""
        try:
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

    def read(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection in a transaction, committed when the block ends (rolled back if
        it raises), for the other table modules of this backend (`api_tables`) that live in the
        store's schema: `search_path`, UTC and error translation (`StorageError`) included."""
        return self._conn()

    def write(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """The same as `read()`: on PostgreSQL every block is one transaction, and row locks,
        not a database-wide write lock, serialise writers. Named apart so that code sharing a
        store reads the same on both backends."""
        return self._conn()

    @staticmethod
    def _encode_instant(value: datetime) -> datetime:
        return value  # psycopg sends datetimes as timestamptz

    def _plan_queue(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(Q["queue_plans"])

    def _execute_batch(
        self, conn: psycopg.Connection[Any], query: str, params: Mapping[str, Any]
    ) -> psycopg.Cursor[Any]:
        return conn.execute(query, params, prepare=False)

    def _prepare_jobs(self, jobs: Sequence[NewJob], now: datetime) -> Sequence[NewJob]:
        return jobs  # encoded as they stream into `_insert_rows`

    def _insert_prepared(
        self, conn: psycopg.Connection[Any], prepared: Sequence[NewJob], now: datetime
    ) -> int:
        return self._insert_rows(conn, prepared, now)

    def api_tables(self) -> ApiTables:
        from recoup.storage.postgres.api_tables import PostgresApiTables

        return PostgresApiTables(self)

    def close(self) -> None:
        self._closing = True
        with self._listener_lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        self._pool.close()

    # Migrations

    def migrate(self) -> int:
        with self._conn() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
            conn.execute(Q["create_schema_version"])
        for migration in load_migrations(self.migrations_package):
            self._apply(migration)
        return self.schema_version()

    def schema_version(self) -> int:
        """The version in force; 0 for a schema never migrated."""
        with self._conn() as conn:
            exists = conn.execute(Q["has_schema_version"], {"schema": self.schema}).fetchone()
            if exists is None or not exists[0]:
                return 0
            row = conn.execute(Q["schema_version"]).fetchone()
        assert row is not None
        return int(row[0])

    def _apply(self, migration: Migration) -> None:
        with self._conn() as conn:
            # The lock serialises migrators (per database); the version is re-read under it.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
            row = conn.execute(Q["schema_version"]).fetchone()
            assert row is not None
            if row[0] >= migration.version:
                return
            conn.execute(migration.sql)
            conn.execute(
                Q["record_migration"], {"version": migration.version, "name": migration.name}
            )

    # Writing jobs

    def insert(self, job: NewJob, *, now: datetime) -> Job:
        values = job_rows.JobEncoder(_utc).row(job, now)
        with self._conn() as conn:
            row = conn.execute(Q["insert_job"], values).fetchone()
            if row is not None:
                return job_rows.job_from_row(row, aware_utc)
            if job.idempotency_key is not None:
                found = conn.execute(
                    Q["get_job_by_idempotency_key"],
                    {"tenant": job.tenant, "key": job.idempotency_key},
                ).fetchone()
                if found is not None:
                    return job_rows.job_from_row(found, aware_utc)
            raise insert_conflict(conn, Q, job)

    def insert_many(self, jobs: Sequence[NewJob], *, now: datetime) -> int:
        if not jobs:
            return 0
        with self._conn() as conn:
            return self._insert_rows(conn, jobs, now)

    def _insert_rows(
        self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], now: datetime
    ) -> int:
        if len(jobs) < COPY_THRESHOLD:
            # One statement with arrays: cheaper than COPY's extra round trips for few rows.
            encoder = job_rows.JobEncoder(_utc)
            columns = zip(*(encoder.row(job, now) for job in jobs), strict=True)
            params: dict[str, Any] = {
                name: list(values)
                for name, values in zip(job_rows.INSERT_COLUMNS, columns, strict=True)
                if name not in ("created_at", "updated_at")
            }
            params["now"] = now
            return conn.execute(Q["insert_jobs_unnest"], params, prepare=False).rowcount
        # Fast path: COPY straight into jobs, which fails as a whole on the first clash (a
        # live name, a used idempotency key or occurrence, an id); then the slower path skips
        # the clashing rows. Resubmitted batches are the exception, so this usually wins.
        # Rows are encoded as they stream, so a million jobs never sit in memory twice.
        try:
            with conn.transaction():
                self._copy(conn, Q["copy_jobs"], jobs, now)
                return len(jobs)
        except psycopg.errors.UniqueViolation:
            pass
        conn.execute(Q["create_stage"])
        self._copy(conn, Q["copy_stage"], jobs, now)
        inserted = conn.execute(Q["insert_from_stage"]).rowcount
        conn.execute(Q["empty_stage"])
        return inserted

    @staticmethod
    def _copy(
        conn: psycopg.Connection[Any], statement: str, jobs: Sequence[NewJob], now: datetime
    ) -> None:
        row = job_rows.JobEncoder(_utc, jsonb_binary=True).row
        with conn.cursor().copy(statement) as copy:
            copy.set_types(_COPY_TYPES)
            write_row = copy.write_row
            for job in jobs:
                write_row(row(job, now))

    # The worker's side

    def claim_due(self, params: ClaimParams) -> list[Job]:
        if params.limit <= 0:
            return []
        with self._conn() as conn:
            conn.execute(Q["queue_plans"])
            # Binary results (instants, numbers) load faster; jsonb comes back as its text
            # (see _ADAPTERS), which `job_from_row` maps to a cached target.
            rows = conn.execute(
                Q["claim_due"],
                {
                    "worker_id": params.worker_id,
                    "now": params.now,
                    "until": params.now + params.horizon,
                    "lease": params.lease,
                    "limit": params.limit,
                },
                prepare=False,
                binary=True,
            ).fetchall()
        jobs = [job_rows.job_from_row(row, aware_utc) for row in rows]
        jobs.sort(key=lambda job: (job.run_at, job.id))
        return jobs

    def complete_many(self, completions: Sequence[Completion], *, now: datetime) -> list[str]:
        if not completions:
            return []
        # One jsonb object, job id → values (see `complete_many` in queries.sql).
        rows: dict[str, list[Any]] = {}
        for completion in latest_completions(completions):
            run = completion.run
            outcome_value, retry, final_state = _OUTCOME_COLUMNS[run.outcome]
            retry_at = completion.retry_at
            rows[run.job_id] = [
                run.tenant,
                run.attempt,
                completion.worker_id,
                outcome_value,
                retry,
                final_state,
                None if retry_at is None else retry_at.isoformat(),
                _json_text(run.error, ERROR_LIMIT),
                run.started_at.isoformat(),
                run.finished_at.isoformat(),
                run.status_code,
                max(0.0, run.duration_ms),
                _json_text(run.response_excerpt, RESPONSE_EXCERPT_LIMIT),
                run.worker_id,
            ]
        with self._conn() as conn:
            conn.execute(Q["queue_plans"])
            found = conn.execute(
                Q["complete_many"], {"rows": job_rows.dumps(rows), "now": now}, prepare=False
            ).fetchall()
        return [row[0] for row in found]

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
        params = {
            "ids": list(job_ids),
            "keys": attempt_keys(job_ids, attempts),
            "worker_id": worker_id,
            "lease_until": lease_until,
        }
        with self._conn() as conn:
            conn.execute(Q["queue_plans"])
            rows = conn.execute(Q["heartbeat"], params, prepare=False).fetchall()
        return [row[0] for row in rows]

    def release(self, worker_id: str, job_ids: Sequence[str], *, now: datetime) -> int:
        if not job_ids:
            return 0
        with self._conn() as conn:
            conn.execute(Q["queue_plans"])
            released = conn.execute(
                Q["release"],
                {"ids": list(job_ids), "worker_id": worker_id, "now": now},
                prepare=False,
            ).rowcount
            if released:
                conn.execute(Q["notify"], {"channel": self.channel})
        return released

    def rescue_expired(self, *, now: datetime, limit: int = 1000) -> list[str]:
        with self._conn() as conn:
            conn.execute(Q["queue_plans"])
            rows = conn.execute(
                Q["rescue_expired"], {"now": now, "limit": limit}, prepare=False
            ).fetchall()
            if rows:
                conn.execute(Q["notify"], {"channel": self.channel})
        return [row[0] for row in rows]

    def next_due_at(self) -> datetime | None:
        with self._conn() as conn:
            row = conn.execute(Q["next_due_at"]).fetchone()
        return None if row is None or row[0] is None else aware_utc(row[0])

    def due_backlog(self, now: datetime) -> int:
        with self._conn() as conn:
            row = conn.execute(Q["due_backlog"], {"now": now}).fetchone()
        return int(row[0]) if row else 0

    def wait_for_notify(self, timeout: float) -> bool:
        """LISTEN on a dedicated connection (opened at the first call, kept until `close`).
        Notifications that arrive between two calls are kept by the connection, so none is
        lost; one thread waits at a time. Waits in slices so that `close` ends a wait within
        `LISTEN_SLICE`."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._listener_lock:
            try:
                if self._closing:
                    return False
                if self._listener is None or self._listener.closed:
                    listener = psycopg.connect(self.url, autocommit=True, **self._connect_kwargs())
                    listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self._listener = listener
                while True:
                    remaining = deadline - time.monotonic()
                    wait = max(0.0, min(remaining, LISTEN_SLICE))
                    for _ in self._listener.notifies(timeout=wait, stop_after=1):
                        return True
                    if remaining <= LISTEN_SLICE or self._closing:
                        return False
            except psycopg.Error as exc:
                if self._listener is not None:
                    self._listener.close()
                    self._listener = None
                raise StorageError(f"PostgreSQL LISTEN: {exc}") from exc

    # Cancelling

    def cancel(self, tenant: str, job_id: str, *, now: datetime) -> Job | None:
        with self._conn() as conn:
            row = conn.execute(
                Q["cancel_job"], {"tenant": tenant, "id": job_id, "now": now}
            ).fetchone()
        return None if row is None else job_rows.job_from_row(row, aware_utc)


# Per run outcome: (outcome, retries?, the job's final state), as complete_many sends them.
_OUTCOME_COLUMNS = {
    outcome: (outcome.value, outcome_is_retry(outcome), FINAL_STATE_OF[outcome].value)
    for outcome in FINAL_STATE_OF
}


def _json_text(text: str | None, limit: int) -> str | None:
    """`text` clipped to `limit`; NUL, which no PostgreSQL text (nor jsonb) can hold, replaced."""
    clipped = clip(text, limit)
    if clipped is None or "\x00" not in clipped:
        return clipped
    return clipped.replace("\x00", "\ufffd")


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)
