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
- An AFTER INSERT statement trigger sends one `pg_notify('<schema>_jobs', '')` per inserting
  statement (it reads no table: migration 0004); `wait_for_notify` LISTENs on a dedicated
  connection.
- `insert` (one job) is one statement in autocommit on its usual path: one round trip, not
  three (BEGIN, INSERT, COMMIT); `statements()` gives the API tables the same.
- The worker's hot path (claims, completions, heartbeats, releases, rescues, waiting for new
  jobs) is `PostgresQueue`, in `queue.py`, and worker sessions (a connection holding an
  advisory lock per running worker) are `PostgresWorkers`, in `workers.py`; this module opens
  the pool, migrates the schema, inserts (COPY included) and cancels jobs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import AdaptersMap, Loader
from psycopg.pq import Format
from psycopg_pool import ConnectionPool, PoolTimeout

from recoup.errors import InvalidInput, StorageError
from recoup.jobs.model import Job, NewJob
from recoup.storage import (
    SCHEMA_NAME_ALLOWED,
    job_rows,
    redact_url,
    row_decoding,
    valid_schema_name,
)
from recoup.storage.change_tables import SqlChangeTables
from recoup.storage.dead_letters import SqlDeadLetters
from recoup.storage.dunning_reports import SqlDunningReports
from recoup.storage.dunning_tables import EXPANSIONS, SqlDunningTables
from recoup.storage.hosted_tables import SqlHostedTables
from recoup.storage.intake_tables import SqlIntakeTables
from recoup.storage.job_rows import aware_utc
from recoup.storage.postgres.queue import PostgresQueue
from recoup.storage.postgres.workers import PostgresWorkers
from recoup.storage.rules import insert_conflict
from recoup.storage.sql_files import Migration, load_migrations, load_queries
from recoup.storage.tenant_tables import SqlTenantTables

if TYPE_CHECKING:
    from recoup.storage.protocol import ApiTables

T = TypeVar("T")

Q = load_queries("recoup.storage.postgres")
DQ = load_queries("recoup.storage.postgres", "dunning_queries.sql", EXPANSIONS)
TQ = load_queries("recoup.storage.postgres", "tenant_queries.sql")
IQ = load_queries("recoup.storage.postgres", "intake_queries.sql")
HQ = load_queries("recoup.storage.postgres", "hosted_queries.sql")

DEFAULT_SCHEMA = "recoup"
POOL_TIMEOUT = 30.0  # seconds to wait for a free pooled connection
CONNECT_TIMEOUT = 10  # seconds to establish one connection
PROBE_TIMEOUT = 5  # seconds for the one connection tried before the pool opens
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
    "bytea",  # metadata (jsonb wire format)
    "timestamptz",  # created_at
    "timestamptz",  # updated_at
]


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


class PostgresStore(
    PostgresQueue,
    PostgresWorkers,
    SqlDunningTables,
    SqlDunningReports,
    SqlTenantTables,
    SqlIntakeTables,
    SqlDeadLetters,
    SqlChangeTables,
):
    """Every store protocol (`recoup.storage.Store`) on PostgreSQL, every table in `schema`."""

    backend = "postgresql"
    migrations_package = "recoup.storage.postgres.migrations"
    Q = Q
    DQ = DQ
    TQ = TQ
    IQ = IQ
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
        self._unit = threading.local()  # `.conn`: the transaction of a unit of work
        self._probe(url)
        self.hosted = SqlHostedTables(
            read=self.read,
            write=self.write,
            encode_instant=self._encode_instant,
            decode_instant=aware_utc,
            queries=HQ,
        )
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
    def statements(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in autocommit, for operations that are one statement on their
        usual path (inserting a job): each statement is its own transaction, one round trip,
        where a transaction block costs three (BEGIN, the statement, COMMIT). What follows a
        statement runs in a snapshot of its own, as in a READ COMMITTED transaction."""
        if getattr(self._unit, "conn", None) is not None:
            with self._conn() as conn:  # inside a unit of work: its transaction
                yield conn
            return
        with self._conn() as conn:
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
        with self._conn() as conn:
            self._unit.conn = conn
            try:
                return fn()
            finally:
                self._unit.conn = None

    def read(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection in a transaction, committed when the block ends (rolled back if
        it raises), for the other table modules of this backend (`api_tables`) that live in the
        store's schema: `search_path`, UTC and error translation (`StorageError`) included."""
        return self._conn()

    @contextmanager
    def _snapshot(self) -> Iterator[psycopg.Connection[Any]]:
        """A read-only REPEATABLE READ transaction: every statement sees the snapshot of the
        first (READ COMMITTED, the default, takes one per statement)."""
        with self._conn() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

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

    def _wake_workers(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(Q["notify"], {"channel": self.channel})  # delivered at commit

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
        # One statement, its own transaction: the insert that clashes (ON CONFLICT DO NOTHING)
        # holds nothing, and the look-ups after it read the clashing row once committed,
        # which is what they would see in the insert's READ COMMITTED transaction too.
        with self.statements() as conn:
            row = conn.execute(Q["insert_job"], values).fetchone()
            if row is not None:
                return row_decoding.job_from_row(row, aware_utc)
            if job.idempotency_key is not None:
                found = conn.execute(
                    Q["get_job_by_idempotency_key"],
                    {"tenant": job.tenant, "key": job.idempotency_key},
                ).fetchone()
                if found is not None:
                    return row_decoding.job_from_row(found, aware_utc)
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

    # Cancelling

    def cancel(self, tenant: str, job_id: str, *, now: datetime, begun: bool = True) -> Job | None:
        query = Q["cancel_job" if begun else "cancel_unbegun_job"]
        with self._conn() as conn:
            row = conn.execute(query, {"tenant": tenant, "id": job_id, "now": now}).fetchone()
        return None if row is None else row_decoding.job_from_row(row, aware_utc)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)
