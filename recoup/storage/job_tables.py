"""Jobs, runs, schedules, tenants and the workers' list on both backends, written once over
the dialect (`recoup.storage.dialect`): cancelling, reading and listing, retention, schedules,
the queue's reads (the next due instant, the backlog) and migrations' bookkeeping. The hot
paths of the worker (claims, completions, heartbeats, inserts) are each backend's `queue`,
written for its driver; `advance_schedule` inserts its jobs through it (`JobInserts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from recoup.jobs.model import Job, JobState, NewJob, Run, Tenant
from recoup.jobs.schedules.model import NewSchedule, Schedule
from recoup.jobs.store import (
    JobFilter,
    JobPage,
    PruneResult,
    RunFilter,
    RunPage,
    ScheduleFilter,
    SchedulePage,
)
from recoup.jobs.worker_records import RegisteredWorker
from recoup.storage import job_rows, row_decoding
from recoup.storage.dialect import Dialect, JobInserts, ping
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


class SqlJobTables:
    """Jobs, runs, schedules and tenants over a dialect, with the backend's own bulk insert
    (`inserts`) for the jobs a schedule materialises."""

    def __init__(self, dialect: Dialect, inserts: JobInserts) -> None:
        self._dialect = dialect
        self._inserts = inserts
        self._sql = dialect.queries

    # The database

    def ping(self) -> None:
        """Raise `StorageError` unless the database answers."""
        ping(self._dialect)

    def migrations(self) -> list[Migration]:
        return load_migrations(self._dialect.migrations_package)

    # Tenants

    def ensure_tenant(self, tenant: Tenant) -> Tenant:
        Q = self._sql
        with self._dialect.write() as conn:
            conn.execute(
                Q["ensure_tenant"],
                {
                    "id": tenant.id,
                    "name": tenant.name,
                    "signing_secret": tenant.signing_secret,
                    "created_at": self._dialect.encode_instant(tenant.created_at),
                },
            )
            row = conn.execute(Q["get_tenant"], {"id": tenant.id}).fetchone()
        assert row is not None
        return row_decoding.tenant_from_row(row, self._dialect.decode_instant)

    def get_tenant(self, tenant_id: str) -> Tenant | None:
        with self._dialect.read() as conn:
            row = conn.execute(self._sql["get_tenant"], {"id": tenant_id}).fetchone()
        return (
            None if row is None else row_decoding.tenant_from_row(row, self._dialect.decode_instant)
        )

    def list_tenants(self) -> list[TenantInfo]:
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["list_tenants"]).fetchall()
        instant = self._dialect.decode_instant
        return [row_decoding.tenant_info_from_row(row, instant) for row in rows]

    # Cancelling

    def cancel_by_name(self, tenant: str, name: str, *, now: datetime) -> int:
        params = {"tenant": tenant, "name": name, "now": self._dialect.encode_instant(now)}
        with self._dialect.write() as conn:
            cancelled: int = conn.execute(self._sql["cancel_by_name"], params).rowcount
            return cancelled

    def cancel_by_prefix(self, tenant: str, prefix: str, *, now: datetime) -> int:
        check_name_prefix(prefix)
        params = {"tenant": tenant, "prefix": prefix, "now": self._dialect.encode_instant(now)}
        with self._dialect.write() as conn:
            cancelled: int = conn.execute(self._sql["cancel_by_prefix"], params).rowcount
            return cancelled

    def cancel_group(self, tenant: str, group: str, *, now: datetime) -> int:
        params = {"tenant": tenant, "group": group, "now": self._dialect.encode_instant(now)}
        with self._dialect.write() as conn:
            cancelled: int = conn.execute(self._sql["cancel_group"], params).rowcount
            return cancelled

    # Reading

    def get(self, tenant: str, job_id: str) -> Job | None:
        with self._dialect.read() as conn:
            row = conn.execute(self._sql["get_job"], {"tenant": tenant, "id": job_id}).fetchone()
        if row is None:
            return None
        return row_decoding.job_from_row(row, self._dialect.decode_instant)

    def get_by_name(self, tenant: str, name: str) -> Job | None:
        Q = self._sql
        params = {"tenant": tenant, "name": name}
        with self._dialect.read() as conn:
            row = conn.execute(Q["get_live_job_by_name"], params).fetchone()
            if row is None:
                row = conn.execute(Q["get_latest_job_by_name"], params).fetchone()
        if row is None:
            return None
        return row_decoding.job_from_row(row, self._dialect.decode_instant)

    def list_jobs(self, query: JobFilter) -> JobPage:
        check_page_limit(query.limit)
        cursor_created: Any = None
        cursor_id: str | None = None
        if query.cursor is not None:
            created, cursor_id = job_rows.decode_cursor(query.cursor)
            cursor_created = self._dialect.encode_instant(created)
        # A group's, a name's or a metadata filter's listing is its own statement, so that it
        # walks its index.
        if query.group is not None:
            statement = self._sql["list_group_jobs"]
        elif query.name is not None:
            statement = self._sql["list_named_jobs"]
        elif query.metadata:
            statement = self._sql["list_metadata_jobs"]
        else:
            statement = self._sql["list_jobs"]
        with self._dialect.read() as conn:
            rows = self._dialect.execute_batch(
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
        instant = self._dialect.decode_instant
        return job_page(rows, query.limit, lambda row: row_decoding.job_from_row(row, instant))

    def runs(self, tenant: str, job_id: str) -> list[Run]:
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["runs"], {"tenant": tenant, "job_id": job_id}).fetchall()
        instant = self._dialect.decode_instant
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
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["list_runs"], params).fetchall()
        instant = self._dialect.decode_instant
        runs = [row_decoding.run_from_row(row, instant) for row in rows[: query.limit]]
        more = len(rows) > query.limit
        return RunPage(runs=runs, next_cursor=str(runs[-1].attempt) if more else None)

    def count_by_state(self, tenant: str | None = None) -> dict[JobState, int]:
        Q = self._sql
        with self._dialect.read() as conn:
            if tenant is None:
                rows = conn.execute(Q["count_by_state"]).fetchall()
            else:
                rows = conn.execute(Q["count_by_state_of_tenant"], {"tenant": tenant}).fetchall()
        return state_counts(rows)

    def count_live(self) -> dict[JobState, int]:
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["count_live"]).fetchall()
        return {JobState(state): int(count) for state, count in rows}

    def count_by_tenant(self) -> dict[str, dict[JobState, int]]:
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["count_by_tenant"]).fetchall()
        counts: dict[str, dict[JobState, int]] = {}
        for tenant, state, count in rows:
            counts.setdefault(tenant, {})[JobState(state)] = int(count)
        return counts

    # Retention

    def prune(self, *, now: datetime, keep_runs_for: timedelta, limit: int = 10_000) -> PruneResult:
        """Deletes at most `limit` jobs and `limit` runs, each batch its own short transaction
        (so pruning never holds locks for long); call again while a count equals `limit`."""
        Q = self._sql
        with self._dialect.write() as conn:
            self._dialect.plan_queue(conn)
            jobs: int = self._dialect.execute_batch(
                conn, Q["prune_jobs"], {"now": self._dialect.encode_instant(now), "limit": limit}
            ).rowcount
        with self._dialect.write() as conn:
            self._dialect.plan_queue(conn)
            runs: int = self._dialect.execute_batch(
                conn,
                Q["prune_runs"],
                {"before": self._dialect.encode_instant(now - keep_runs_for), "limit": limit},
            ).rowcount
        return PruneResult(jobs=jobs, runs=runs)

    # Schedules

    def insert_schedule(
        self, schedule: NewSchedule, *, next_fire_at: datetime | None, now: datetime
    ) -> Schedule:
        values = job_rows.schedule_values(
            schedule, next_fire_at=next_fire_at, now=now, instant=self._dialect.row_instant
        )
        with self._dialect.write() as conn:
            row = conn.execute(self._sql["insert_schedule"], values).fetchone()
        if row is None:
            raise schedule_conflict(schedule)
        return row_decoding.schedule_from_row(row, self._dialect.decode_instant)

    def get_schedule(self, tenant: str, schedule_id: str) -> Schedule | None:
        """Deleted schedules are returned too, with `deleted=True` (their jobs still name them)."""
        params = {"tenant": tenant, "id": schedule_id}
        with self._dialect.read() as conn:
            row = conn.execute(self._sql["get_schedule"], params).fetchone()
        return (
            None
            if row is None
            else row_decoding.schedule_from_row(row, self._dialect.decode_instant)
        )

    def list_schedules(self, query: ScheduleFilter) -> SchedulePage:
        check_page_limit(query.limit)
        params = {
            "tenant": query.tenant,
            "paused": None if query.paused is None else self._dialect.encode_bool(query.paused),
            "ended": None if query.ended is None else self._dialect.encode_bool(query.ended),
            "name": query.name,
            "metadata": job_rows.dumps(query.metadata) if query.metadata else None,
            "after_name": query.cursor,  # names are unique among live schedules
            "limit": query.limit + 1,  # one more says whether a next page exists
        }
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["list_schedules"], params).fetchall()
        instant = self._dialect.decode_instant
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
        encode = self._dialect.encode_instant
        params = {
            "tenant": tenant,
            "id": schedule_id,
            "paused": self._dialect.encode_bool(paused),
            "next_fire_at": None if next_fire_at is None else encode(next_fire_at),
            "now": encode(now),
        }
        with self._dialect.write() as conn:
            row = conn.execute(self._sql["set_schedule_paused"], params).fetchone()
        return (
            None
            if row is None
            else row_decoding.schedule_from_row(row, self._dialect.decode_instant)
        )

    def delete_schedule(self, tenant: str, schedule_id: str, *, now: datetime) -> bool:
        Q = self._sql
        at = self._dialect.encode_instant(now)
        with self._dialect.write() as conn:
            deleted = conn.execute(
                Q["delete_schedule"], {"tenant": tenant, "id": schedule_id, "now": at}
            ).rowcount
            if deleted:
                conn.execute(Q["cancel_schedule_jobs"], {"schedule_id": schedule_id, "now": at})
        return bool(deleted)

    def due_schedules(self, *, now: datetime, horizon: timedelta, limit: int) -> list[Schedule]:
        params = {"until": self._dialect.encode_instant(now + horizon), "limit": limit}
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["due_schedules"], params).fetchall()
        instant = self._dialect.decode_instant
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
        encode = self._dialect.encode_instant
        prepared = self._inserts.prepare_jobs(jobs, now)
        with self._dialect.write() as conn:
            # On PostgreSQL the UPDATE locks the schedule's row (on SQLite the write lock is
            # held already): a second scheduler waits here, then finds next_fire_at moved and
            # changes nothing.
            advanced = conn.execute(
                self._sql["advance_schedule"],
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
            inserted = self._inserts.insert_prepared(conn, prepared, now) if prepared else 0
        if inserted:
            self._dialect.jobs_inserted()
        return True

    # The queue's reads and the workers

    def next_due_at(self) -> datetime | None:
        with self._dialect.read() as conn:
            row = conn.execute(self._sql["next_due_at"]).fetchone()
        return None if row is None or row[0] is None else self._dialect.decode_instant(row[0])

    def due_backlog(self, now: datetime) -> int:
        with self._dialect.read() as conn:
            row = conn.execute(
                self._sql["due_backlog"], {"now": self._dialect.encode_instant(now)}
            ).fetchone()
        return int(row[0]) if row else 0

    def workers(self) -> list[RegisteredWorker]:
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["list_workers"]).fetchall()
        instant = self._dialect.decode_instant
        return [
            RegisteredWorker(
                id=row[0],
                host=row[1],
                pid=row[2],
                process_key=row[3],
                started_at=instant(row[4]),
                heartbeat_at=instant(row[5]),
            )
            for row in rows
        ]


__all__ = ["SqlJobTables"]
