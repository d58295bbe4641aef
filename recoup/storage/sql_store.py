"""What the SQLite and PostgreSQL stores share: the operations whose statements, parameters and
row mapping are the same on both backends (tenants, cancelling, reading, retention, schedules,
migrations bookkeeping), written once against four per-dialect hooks:

- `read()` / `write()`: a connection for reading, and one write transaction (on PostgreSQL
  both are a pooled connection in a transaction; on SQLite an autocommit read and a
  `BEGIN IMMEDIATE` transaction);
- `_encode_instant` / `_decode_instant`: an instant as a query parameter and back from a column
  (timestamptz as is on PostgreSQL; integer microseconds on SQLite), and `_row_instant`, the
  encoding `job_rows` uses for whole rows;
- `Q`: the backend's queries (same names, per-dialect SQL).

The hot paths of the worker (claims, completions, heartbeats, bulk inserts) stay in each
backend, written for its driver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from recoup.jobs.model import Job, JobState, NewJob, Run, Tenant
from recoup.jobs.schedule_model import NewSchedule, Schedule
from recoup.jobs.store import (
    JobFilter,
    JobPage,
    PruneResult,
    RunFilter,
    RunPage,
    ScheduleFilter,
    SchedulePage,
)
from recoup.storage import job_rows, row_decoding
from recoup.storage.rules import (
    check_name_prefix,
    check_page_limit,
    check_schedule_jobs,
    job_page,
    schedule_conflict,
    state_counts,
)
from recoup.storage.sql_files import Migration, load_migrations
from recoup.tenancy import TenantInfo

if TYPE_CHECKING:
    from recoup.storage.protocol import ApiTables

T = TypeVar("T")


class SqlStore:
    """The backend-independent part of `SqliteStore` and `PostgresStore`."""

    backend: ClassVar[str]  # "sqlite" or "postgresql"
    migrations_package: ClassVar[str]  # the package of the backend's NNNN_*.sql files
    schema: str | None = None  # the PostgreSQL schema holding the tables
    Q: ClassVar[Mapping[str, str]]

    @staticmethod
    def _encode_instant(value: datetime, /) -> Any:
        """An instant as a query parameter."""
        raise NotImplementedError

    @staticmethod
    def _row_instant(value: datetime, /) -> Any:
        """An instant in a row `job_rows` encodes."""
        raise NotImplementedError

    @staticmethod
    def _decode_instant(value: Any, /) -> datetime:
        """An instant from a column."""
        raise NotImplementedError

    def read(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def write(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def api_tables(self) -> ApiTables:
        """The API's tables in this store's database (each backend's `api_tables` module)."""
        raise NotImplementedError

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run `fn`, whose reads and writes go through this store, as one transaction."""
        raise NotImplementedError

    # The database

    def ping(self) -> None:
        """Raise `StorageError` unless the database answers."""
        with self.read() as conn:
            conn.execute("SELECT 1").fetchone()

    def migrations(self) -> list[Migration]:
        return load_migrations(self.migrations_package)

    # Per-dialect details of the shared operations

    def _encode_bool(self, value: bool) -> Any:
        return value

    def _plan_queue(self, conn: Any) -> None:
        """Whatever the backend runs before a statement over the queue (nothing by default)."""

    def _execute_batch(self, conn: Any, query: str, params: Mapping[str, Any]) -> Any:
        """Run a batch statement (listings, pruning), whose plan depends on its parameters."""
        return conn.execute(query, params)

    def _prepare_jobs(self, jobs: Sequence[NewJob], now: datetime) -> Sequence[Any]:
        """The jobs of `advance_schedule` as `_insert_prepared` takes them, made before the
        write transaction begins."""
        raise NotImplementedError

    def _insert_prepared(self, conn: Any, prepared: Sequence[Any], now: datetime) -> int:
        raise NotImplementedError

    def _jobs_inserted(self) -> None:
        """Called after a transaction that inserted jobs has committed (nothing by default)."""

    # Tenants

    def ensure_tenant(self, tenant: Tenant) -> Tenant:
        Q = self.Q
        with self.write() as conn:
            conn.execute(
                Q["ensure_tenant"],
                {
                    "id": tenant.id,
                    "name": tenant.name,
                    "signing_secret": tenant.signing_secret,
                    "created_at": self._encode_instant(tenant.created_at),
                },
            )
            row = conn.execute(Q["get_tenant"], {"id": tenant.id}).fetchone()
        assert row is not None
        return row_decoding.tenant_from_row(row, self._decode_instant)

    def get_tenant(self, tenant_id: str) -> Tenant | None:
        with self.read() as conn:
            row = conn.execute(self.Q["get_tenant"], {"id": tenant_id}).fetchone()
        return None if row is None else row_decoding.tenant_from_row(row, self._decode_instant)

    def list_tenants(self) -> list[TenantInfo]:
        with self.read() as conn:
            rows = conn.execute(self.Q["list_tenants"]).fetchall()
        instant = self._decode_instant
        return [row_decoding.tenant_info_from_row(row, instant) for row in rows]

    # Cancelling

    def cancel_by_name(self, tenant: str, name: str, *, now: datetime) -> int:
        params = {"tenant": tenant, "name": name, "now": self._encode_instant(now)}
        with self.write() as conn:
            cancelled: int = conn.execute(self.Q["cancel_by_name"], params).rowcount
            return cancelled

    def cancel_by_prefix(self, tenant: str, prefix: str, *, now: datetime) -> int:
        check_name_prefix(prefix)
        params = {"tenant": tenant, "prefix": prefix, "now": self._encode_instant(now)}
        with self.write() as conn:
            cancelled: int = conn.execute(self.Q["cancel_by_prefix"], params).rowcount
            return cancelled

    def cancel_group(self, tenant: str, group: str, *, now: datetime) -> int:
        params = {"tenant": tenant, "group": group, "now": self._encode_instant(now)}
        with self.write() as conn:
            cancelled: int = conn.execute(self.Q["cancel_group"], params).rowcount
            return cancelled

    # Reading

    def get(self, tenant: str, job_id: str) -> Job | None:
        with self.read() as conn:
            row = conn.execute(self.Q["get_job"], {"tenant": tenant, "id": job_id}).fetchone()
        return None if row is None else row_decoding.job_from_row(row, self._decode_instant)

    def get_by_name(self, tenant: str, name: str) -> Job | None:
        Q = self.Q
        params = {"tenant": tenant, "name": name}
        with self.read() as conn:
            row = conn.execute(Q["get_live_job_by_name"], params).fetchone()
            if row is None:
                row = conn.execute(Q["get_latest_job_by_name"], params).fetchone()
        return None if row is None else row_decoding.job_from_row(row, self._decode_instant)

    def list_jobs(self, query: JobFilter) -> JobPage:
        check_page_limit(query.limit)
        cursor_created: Any = None
        cursor_id: str | None = None
        if query.cursor is not None:
            created, cursor_id = job_rows.decode_cursor(query.cursor)
            cursor_created = self._encode_instant(created)
        # A group's, a name's or a metadata filter's listing is its own statement, so that it
        # walks its index.
        if query.group is not None:
            statement = self.Q["list_group_jobs"]
        elif query.name is not None:
            statement = self.Q["list_named_jobs"]
        elif query.metadata:
            statement = self.Q["list_metadata_jobs"]
        else:
            statement = self.Q["list_jobs"]
        with self.read() as conn:
            rows = self._execute_batch(
                conn,
                statement,
                {
                    "tenant": query.tenant,
                    "state": None if query.state is None else query.state.value,
                    "prefix": query.name_prefix,
                    "name": query.name,
                    "schedule_id": query.schedule_id,
                    "group": query.group,
                    "metadata": job_rows.dumps(query.metadata) if query.metadata else None,
                    "cursor_created": cursor_created,
                    "cursor_id": cursor_id,
                    "limit": query.limit + 1,  # one more says whether a next page exists
                },
            ).fetchall()
        instant = self._decode_instant
        return job_page(rows, query.limit, lambda row: row_decoding.job_from_row(row, instant))

    def runs(self, tenant: str, job_id: str) -> list[Run]:
        with self.read() as conn:
            rows = conn.execute(self.Q["runs"], {"tenant": tenant, "job_id": job_id}).fetchall()
        instant = self._decode_instant
        return [row_decoding.run_from_row(row, instant) for row in rows]

    def list_runs(self, query: RunFilter) -> RunPage:
        check_page_limit(query.limit)
        after = 0 if query.cursor is None else job_rows.decode_run_cursor(query.cursor)
        params = {
            "tenant": query.tenant,
            "job_id": query.job_id,
            "after_attempt": after,
            "limit": query.limit + 1,  # one more says whether a next page exists
        }
        with self.read() as conn:
            rows = conn.execute(self.Q["list_runs"], params).fetchall()
        instant = self._decode_instant
        runs = [row_decoding.run_from_row(row, instant) for row in rows[: query.limit]]
        more = len(rows) > query.limit
        return RunPage(runs=runs, next_cursor=str(runs[-1].attempt) if more else None)

    def count_by_state(self, tenant: str | None = None) -> dict[JobState, int]:
        Q = self.Q
        with self.read() as conn:
            if tenant is None:
                rows = conn.execute(Q["count_by_state"]).fetchall()
            else:
                rows = conn.execute(Q["count_by_state_of_tenant"], {"tenant": tenant}).fetchall()
        return state_counts(rows)

    def count_live(self) -> dict[JobState, int]:
        with self.read() as conn:
            rows = conn.execute(self.Q["count_live"]).fetchall()
        return {JobState(state): int(count) for state, count in rows}

    def count_by_tenant(self) -> dict[str, dict[JobState, int]]:
        with self.read() as conn:
            rows = conn.execute(self.Q["count_by_tenant"]).fetchall()
        counts: dict[str, dict[JobState, int]] = {}
        for tenant, state, count in rows:
            counts.setdefault(tenant, {})[JobState(state)] = int(count)
        return counts

    # Retention

    def prune(self, *, now: datetime, keep_runs_for: timedelta, limit: int = 10_000) -> PruneResult:
        """Deletes at most `limit` jobs and `limit` runs, each batch its own short transaction
        (so pruning never holds locks for long); call again while a count equals `limit`."""
        Q = self.Q
        with self.write() as conn:
            self._plan_queue(conn)
            jobs: int = self._execute_batch(
                conn, Q["prune_jobs"], {"now": self._encode_instant(now), "limit": limit}
            ).rowcount
        with self.write() as conn:
            self._plan_queue(conn)
            runs: int = self._execute_batch(
                conn,
                Q["prune_runs"],
                {"before": self._encode_instant(now - keep_runs_for), "limit": limit},
            ).rowcount
        return PruneResult(jobs=jobs, runs=runs)

    # Schedules

    def insert_schedule(
        self, schedule: NewSchedule, *, next_fire_at: datetime | None, now: datetime
    ) -> Schedule:
        values = job_rows.schedule_values(
            schedule, next_fire_at=next_fire_at, now=now, instant=self._row_instant
        )
        with self.write() as conn:
            row = conn.execute(self.Q["insert_schedule"], values).fetchone()
        if row is None:
            raise schedule_conflict(schedule)
        return row_decoding.schedule_from_row(row, self._decode_instant)

    def get_schedule(self, tenant: str, schedule_id: str) -> Schedule | None:
        """Deleted schedules are returned too, with `deleted=True` (their jobs still name them)."""
        params = {"tenant": tenant, "id": schedule_id}
        with self.read() as conn:
            row = conn.execute(self.Q["get_schedule"], params).fetchone()
        return None if row is None else row_decoding.schedule_from_row(row, self._decode_instant)

    def list_schedules(self, query: ScheduleFilter) -> SchedulePage:
        check_page_limit(query.limit)
        params = {
            "tenant": query.tenant,
            "paused": None if query.paused is None else self._encode_bool(query.paused),
            "ended": None if query.ended is None else self._encode_bool(query.ended),
            "name": query.name,
            "metadata": job_rows.dumps(query.metadata) if query.metadata else None,
            "after_name": query.cursor,  # names are unique among live schedules
            "limit": query.limit + 1,  # one more says whether a next page exists
        }
        with self.read() as conn:
            rows = conn.execute(self.Q["list_schedules"], params).fetchall()
        instant = self._decode_instant
        found = [row_decoding.schedule_from_row(row, instant) for row in rows[: query.limit]]
        more = len(rows) > query.limit
        return SchedulePage(schedules=found, next_cursor=found[-1].name if more else None)

    def set_schedule_paused(
        self,
        tenant: str,
        schedule_id: str,
        *,
        paused: bool,
        now: datetime,
        next_fire_at: datetime | None = None,
    ) -> Schedule | None:
        encode = self._encode_instant
        params = {
            "tenant": tenant,
            "id": schedule_id,
            "paused": self._encode_bool(paused),
            "next_fire_at": None if next_fire_at is None else encode(next_fire_at),
            "now": encode(now),
        }
        with self.write() as conn:
            row = conn.execute(self.Q["set_schedule_paused"], params).fetchone()
        return None if row is None else row_decoding.schedule_from_row(row, self._decode_instant)

    def delete_schedule(self, tenant: str, schedule_id: str, *, now: datetime) -> bool:
        Q = self.Q
        at = self._encode_instant(now)
        with self.write() as conn:
            deleted = conn.execute(
                Q["delete_schedule"], {"tenant": tenant, "id": schedule_id, "now": at}
            ).rowcount
            if deleted:
                conn.execute(Q["cancel_schedule_jobs"], {"schedule_id": schedule_id, "now": at})
        return bool(deleted)

    def due_schedules(self, *, now: datetime, horizon: timedelta, limit: int) -> list[Schedule]:
        params = {"until": self._encode_instant(now + horizon), "limit": limit}
        with self.read() as conn:
            rows = conn.execute(self.Q["due_schedules"], params).fetchall()
        instant = self._decode_instant
        return [row_decoding.schedule_from_row(row, instant) for row in rows]

    def advance_schedule(
        self,
        schedule_id: str,
        *,
        expected_next: datetime,
        new_next: datetime | None,
        jobs: Sequence[NewJob],
        now: datetime,
        revision: int | None = None,
    ) -> bool:
        check_schedule_jobs(schedule_id, jobs)
        encode = self._encode_instant
        prepared = self._prepare_jobs(jobs, now)
        with self.write() as conn:
            # On PostgreSQL the UPDATE locks the schedule's row (on SQLite the write lock is
            # held already): a second scheduler waits here, then finds next_fire_at moved and
            # changes nothing.
            advanced = conn.execute(
                self.Q["advance_schedule"],
                {
                    "id": schedule_id,
                    "expected_next": encode(expected_next),
                    "new_next": None if new_next is None else encode(new_next),
                    "now": encode(now),
                    "revision": revision,
                },
            ).rowcount
            if not advanced:
                return False
            inserted = self._insert_prepared(conn, prepared, now) if prepared else 0
        if inserted:
            self._jobs_inserted()
        return True
