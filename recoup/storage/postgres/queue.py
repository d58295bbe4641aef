"""The PostgreSQL job queue, the hot path written for psycopg: inserting jobs and cancelling
one; claims, completions and rescues, each one statement per batch after `queue_plans` and run
with `prepare=False` (see `dialect.py`); and waiting for new jobs (LISTEN on a dedicated
connection). Heartbeats and releases, the same on both drivers, are `lease_tables`'.

- `insert` (one job) is one statement in autocommit on its usual path: one round trip, not
  three (BEGIN, INSERT, COMMIT).
- Bulk inserts COPY (binary) straight into jobs; a batch that clashes (live name, idempotency
  key, occurrence, id) is COPied again into a per-session staging table and moved with `INSERT
  … SELECT … ON CONFLICT DO NOTHING`. Batches under `COPY_THRESHOLD` rows are one `unnest`
  INSERT.
- Claims lock a batch with `FOR UPDATE SKIP LOCKED` over the partial index of due jobs;
  completions (with their run-log rows) and rescues are one statement per batch.
- An AFTER INSERT statement trigger sends one `pg_notify('<schema>_jobs', '')` per inserting
  statement (it reads no table: migration 0004); `wait_for_notify` LISTENs on a dedicated
  connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from recoup.errors import StorageError
from recoup.jobs.model import ERROR_LIMIT, RESPONSE_EXCERPT_LIMIT, Completion, Job, NewJob
from recoup.jobs.store import ClaimParams
from recoup.storage import job_rows, row_decoding
from recoup.storage.flow_claims import claim_flow_jobs, firing_order
from recoup.storage.job_rows import aware_utc
from recoup.storage.postgres.dialect import QUERIES, PostgresDialect
from recoup.storage.rules import (
    ENDED,
    FINAL_STATE_OF,
    claimed_jobs,
    clip,
    job_holding_key,
    latest_completions,
    outcome_is_retry,
)

LISTEN_SLICE = 0.25  # seconds: how long `close` may wait for a waiting `wait_for_notify`
COPY_THRESHOLD = 16  # rows from which insert_many uses COPY (measured: COPY wins from ~20)
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
    "text",  # flow_key
    "int4",  # flow_rate
    "float8",  # flow_period_s
    "int4",  # flow_parallelism
    "text",  # flow_order
    "timestamptz",  # flow_order_at
    "text",  # traceparent
    "text",  # tracestate
    "timestamptz",  # created_at
    "timestamptz",  # updated_at
]


Q = QUERIES


class PostgresQueue:
    """The jobs' hot path over a `PostgresDialect`'s pooled connections and its notification
    channel."""

    def __init__(self, dialect: PostgresDialect) -> None:
        self._dialect = dialect
        self._connection = dialect.connection
        self._listener: psycopg.Connection[Any] | None = None
        self._listener_lock = threading.Lock()
        self._closing = False

    def close(self) -> None:
        """End a waiting `wait_for_notify` (within `LISTEN_SLICE`) and close the listener."""
        self._closing = True
        with self._listener_lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    # Writing jobs

    def insert(self, job: NewJob, *, now: datetime) -> Job:
        values = job_rows.JobEncoder(_utc).row(job, now)
        # One statement, its own transaction: the insert that clashes (ON CONFLICT DO NOTHING)
        # holds nothing, and the look-ups after it read the clashing row once committed,
        # which is what they would see in the insert's READ COMMITTED transaction too.
        with self._dialect.statement_write() as conn:
            stored = conn.execute(Q["insert_job"], values).fetchone()
            if stored is not None:
                row = job_rows.inserted_row(values, stored)
                return row_decoding.job_from_row(row, aware_utc)
            return job_holding_key(conn, Q, job, aware_utc)

    def insert_many(self, jobs: Sequence[NewJob], *, now: datetime) -> int:
        if not jobs:
            return 0
        with self._connection() as conn:
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

    def cancel(self, tenant: str, job_id: str, *, now: datetime, begun: bool = True) -> Job | None:
        query = Q["cancel_job" if begun else "cancel_unbegun_job"]
        with self._connection() as conn:
            row = conn.execute(query, {"tenant": tenant, "id": job_id, "now": now}).fetchone()
        return None if row is None else row_decoding.job_from_row(row, aware_utc)

    def prepare_jobs(self, jobs: Sequence[NewJob], now: datetime) -> Sequence[NewJob]:
        return jobs  # encoded as they stream into `_insert_rows`

    def insert_prepared(
        self, conn: psycopg.Connection[Any], prepared: Sequence[NewJob], now: datetime
    ) -> int:
        return self._insert_rows(conn, prepared, now)

    # The worker's side

    def claim_due(self, params: ClaimParams) -> list[Job]:
        if params.limit <= 0 and not params.give_back:
            return []
        with self._connection() as conn:
            if params.store_clock:  # what is due and the leases by the server's clock
                params = replace(params, now=self._dialect.read_clock(conn))
            if params.give_back:
                back = {
                    "ids": list(params.give_back),
                    "worker_id": params.worker_id,
                    "now": params.now,
                }
                if conn.execute(Q["release"], back, prepare=False).rowcount:
                    self._dialect.wake_workers(conn)  # due again: other workers may take them
            if params.limit <= 0:
                return []  # only handed back: committed as the block ends
            # The flow keys' jobs first: they take no more than their keys allow, and jobs
            # without a key take the rest (ARCHITECTURE.md, 'Flow control').
            flowing = claim_flow_jobs(conn, Q, params, encode=_utc, decode=aware_utc)
            conn.execute(Q["queue_plans"])
            # Binary results (instants, numbers) load faster; jsonb comes back as its text
            # (see `_ADAPTERS` in store.py), which `job_from_row` maps to a cached target.
            rows = conn.execute(
                Q["claim_due"],
                {
                    "worker_id": params.worker_id,
                    "now": params.now,
                    "until": params.now + params.horizon,
                    "lease": params.lease,
                    "limit": params.limit - len(flowing),
                },
                prepare=False,
                binary=True,
            ).fetchall()
        return firing_order(claimed_jobs(rows, aware_utc), flowing)

    def complete_many(self, completions: Sequence[Completion], *, now: datetime) -> list[str]:
        if not completions:
            return []
        # One jsonb object, job id → values (see `complete_many` in queries.sql).
        rows: dict[str, list[Any]] = {}
        callbacks: dict[str, NewJob] = {}
        for completion in latest_completions(completions):
            run = completion.run
            if completion.callback is not None:
                callbacks[run.job_id] = completion.callback
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
        with self._connection() as conn:
            conn.execute(Q["queue_plans"])
            found = conn.execute(
                Q["complete_many"], {"rows": job_rows.dumps(rows), "now": now}, prepare=False
            ).fetchall()
            if callbacks:
                # The reports of the jobs that ended, in the same transaction (a clash on their
                # idempotency key, a report already made, is skipped).
                ended = {job_id for job_id, outcome in found if outcome in ENDED}
                reports = [job for job_id, job in callbacks.items() if job_id in ended]
                if reports:
                    self._insert_rows(conn, reports, now)
        return [row[0] for row in found]

    def rescue_expired(
        self, *, now: datetime, limit: int = 1000, store_clock: bool = False
    ) -> list[str]:
        with self._connection() as conn:
            if store_clock:  # expired by the server's clock, not the rescuer's
                now = self._dialect.read_clock(conn)
            conn.execute(Q["queue_plans"])
            rows = conn.execute(
                Q["rescue_expired"], {"now": now, "limit": limit}, prepare=False
            ).fetchall()
            if rows:
                self._dialect.wake_workers(conn)
        return [row[0] for row in rows]

    def read_clock(self) -> datetime:
        with self._dialect.statement_read() as conn:
            return self._dialect.read_clock(conn)

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
                    listener = psycopg.connect(
                        self._dialect.url, autocommit=True, **self._dialect.connect_kwargs()
                    )
                    # Held by the queue before LISTEN, so that a LISTEN that fails closes it
                    # below rather than leaving an open connection to the garbage collector.
                    self._listener = listener
                    listener.execute(
                        sql.SQL("LISTEN {}").format(sql.Identifier(self._dialect.channel))
                    )
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
