"""The SQLite job queue, the hot path written for `sqlite3`: inserting jobs (one, and in bulk
with `executemany`) and cancelling one; claims, completions and rescues, each one `BEGIN
IMMEDIATE` transaction; and waiting for new jobs. Heartbeats and releases, the same on both
drivers, are `lease_tables`'.

`wait_for_notify` wakes at once for inserts made through any store on the same file in this
process, and within `WAKE_POLL_INTERVAL` for inserts made by other processes (they bump a
counter row that idle waiters poll: a read of one row, so polling costs next to nothing).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from recoup.errors import StorageError
from recoup.jobs.model import (
    ERROR_LIMIT,
    RESPONSE_EXCERPT_LIMIT,
    Completion,
    Job,
    JobState,
    NewJob,
    Run,
    RunOutcome,
)
from recoup.jobs.store import ClaimParams
from recoup.storage import job_rows, row_decoding
from recoup.storage.flow_claims import claim_flow_jobs, firing_order
from recoup.storage.job_rows import ONE_US, from_micros, micros, remembering
from recoup.storage.rules import (
    ENDED,
    FINAL_STATE_OF,
    claimed_jobs,
    clip,
    job_holding_key,
    latest_completions,
    outcome_is_retry,
)
from recoup.storage.sqlite.dialect import MEMORY, QUERIES, SqliteDialect

WAKE_POLL_INTERVAL = 0.05  # seconds between checks for inserts made by other processes

Q = QUERIES


class SqliteQueue:
    """The jobs' hot path over a `SqliteDialect`'s connections, write lock and wake-ups."""

    def __init__(self, dialect: SqliteDialect) -> None:
        self._dialect = dialect
        self._write = dialect.transaction
        self._connection = dialect.connection
        self._wakeups = dialect.wakeups

    # Writing jobs

    def insert(self, job: NewJob, *, now: datetime) -> Job:
        values = job_rows.JobEncoder(micros).row(job, micros(now))
        with self._write() as conn:
            row = conn.execute(Q["insert_job"], values).fetchone()
            if row is None:
                return job_holding_key(conn, Q, job, from_micros)
            conn.execute(Q["bump_wakeups"])
        self._wakeups.notify()
        return row_decoding.job_from_row(row, from_micros)

    def insert_many(self, jobs: Sequence[NewJob], *, now: datetime) -> int:
        if not jobs:
            return 0
        rows = self.prepare_jobs(jobs, now)
        with self._write() as conn:
            inserted = self._insert_rows(conn, rows)
        if inserted:
            self._wakeups.notify()
        return inserted

    def prepare_jobs(self, jobs: Sequence[NewJob], now: datetime) -> list[tuple[Any, ...]]:
        # Encoded before the write transaction, so that the write lock is held the shorter.
        encoder = job_rows.JobEncoder(micros)
        now_us = micros(now)
        return [encoder.row(job, now_us) for job in jobs]

    def insert_prepared(
        self, conn: sqlite3.Connection, prepared: Sequence[Any], now: datetime
    ) -> int:
        return self._insert_rows(conn, list(prepared))

    @staticmethod
    def _insert_rows(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> int:
        before = conn.total_changes
        conn.executemany(Q["insert_job_quietly"], rows)
        inserted = conn.total_changes - before
        if inserted:
            # Other processes' idle waiters poll this counter (see wait_for_notify).
            conn.execute(Q["bump_wakeups"])
        return inserted

    def cancel(self, tenant: str, job_id: str, *, now: datetime, begun: bool = True) -> Job | None:
        query = Q["cancel_job" if begun else "cancel_unbegun_job"]
        with self._write() as conn:
            conn.execute(query, {"tenant": tenant, "id": job_id, "now": micros(now)})
            row = conn.execute(Q["get_job"], {"tenant": tenant, "id": job_id}).fetchone()
        return None if row is None else row_decoding.job_from_row(row, from_micros)

    # The worker's side

    def claim_due(self, params: ClaimParams) -> list[Job]:
        if params.limit <= 0 and not params.give_back:
            return []
        with self._write() as conn:
            if params.store_clock:  # what is due and the leases by SQLite's clock
                params = replace(params, now=self._dialect.read_clock(conn))
            now = micros(params.now)
            handed_back = 0
            if params.give_back:
                back = {"ids": json.dumps(params.give_back), "worker_id": params.worker_id}
                handed_back = conn.execute(Q["release"], {**back, "now": now}).rowcount
                if handed_back:
                    conn.execute(Q["bump_wakeups"])  # due again: other processes may take them
            rows = []
            flowing: list[Job] = []
            if params.limit > 0:
                # The flow keys' jobs first: they take no more than their keys allow, and jobs
                # without a key take the rest (ARCHITECTURE.md, 'Flow control').
                flowing = claim_flow_jobs(conn, Q, params, encode=micros, decode=from_micros)
                rows = conn.execute(
                    Q["claim_due"],
                    {
                        "worker_id": params.worker_id,
                        "now": now,
                        "until": now + params.horizon // ONE_US,
                        "lease": params.lease // ONE_US,
                        "limit": params.limit - len(flowing),
                    },
                ).fetchall()
        if handed_back:
            self._wakeups.notify()
        return firing_order(claimed_jobs(rows, remembering(from_micros)), flowing)

    def complete_many(self, completions: Sequence[Completion], *, now: datetime) -> list[str]:
        if not completions:
            return []
        now_us = micros(now)
        batch = latest_completions(completions)
        errors = [clip(completion.run.error, ERROR_LIMIT) for completion in batch]
        rows = [
            [
                completion.run.job_id,
                completion.worker_id,
                completion.run.attempt,
                1 if outcome_is_retry(completion.run.outcome) else 0,
                FINAL_STATE_OF[completion.run.outcome].value,
                now_us if completion.retry_at is None else micros(completion.retry_at),
                # SQLite's JSON text ends at a NUL: such an error is set apart, below.
                None if error is None or "\x00" in error else error,
            ]
            for completion, error in zip(batch, errors, strict=True)
        ]
        applied: list[str] = []
        runs: list[tuple[Any, ...]] = []
        callbacks: list[NewJob] = []
        with self._write() as conn:
            # One statement for the batch (see `complete_jobs`): the state each applied
            # completion left its job in, by job id.
            states = dict(
                conn.execute(
                    Q["complete_jobs"], {"rows": job_rows.dumps(rows), "now": now_us}
                ).fetchall()
            )
            for completion, error in zip(batch, errors, strict=True):
                run = completion.run
                state = states.get(run.job_id)
                if state is not None:
                    applied.append(run.job_id)
                    if error is not None and "\x00" in error:
                        conn.execute(Q["set_last_error"], {"id": run.job_id, "error": error})
                    outcome = run.outcome
                    if state == JobState.FAILED and outcome_is_retry(outcome):
                        outcome = RunOutcome.FAILED  # attempts spent: no further attempt
                    runs.append(_run_values(run, outcome))
                    if completion.callback is not None and state in ENDED:
                        callbacks.append(completion.callback)
                elif conn.execute(
                    Q["was_cancelled_during_attempt"],
                    {"id": run.job_id, "worker_id": completion.worker_id, "attempt": run.attempt},
                ).fetchone():
                    # Cancelled while this attempt ran: the attempt happened, so log it, but
                    # leave the job cancelled.
                    runs.append(_run_values(run, RunOutcome.CANCELLED))
            conn.executemany(Q["insert_run"], runs)
            # The reports of the jobs that ended, in the same transaction (a clash on their
            # idempotency key, a report already made, is skipped).
            reported = (
                self._insert_rows(conn, self.prepare_jobs(callbacks, now)) if callbacks else 0
            )
        if reported:
            self._wakeups.notify()
        return applied

    def rescue_expired(
        self, *, now: datetime, limit: int = 1000, store_clock: bool = False
    ) -> list[str]:
        # The rule is `recoup.storage.rules`'; the write lock holds the batch still meanwhile.
        with self._write() as conn:
            if store_clock:  # expired by SQLite's clock, not the rescuer's
                now = self._dialect.read_clock(conn)
            now_us = micros(now)
            rows = conn.execute(Q["expired_leases"], {"now": now_us, "limit": limit}).fetchall()
            rescued = [row[0] for row in rows]
            if rescued:
                params = {"ids": json.dumps(rescued), "now": now_us, "session": 0}
                conn.execute(Q["log_lost_attempts"], params)
                conn.execute(Q["rescue_jobs"], params)
                conn.execute(Q["bump_wakeups"])
        if rescued:
            self._wakeups.notify()
        return rescued

    def read_clock(self) -> datetime:
        with self._connection() as conn:
            return self._dialect.read_clock(conn)

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
            if remaining <= 0 or self._dialect.closed:
                return False
            with wakeups.condition:
                if wakeups.condition.wait_for(
                    lambda: wakeups.generation != generation,
                    timeout=min(remaining, WAKE_POLL_INTERVAL),
                ):
                    return True
            if self._dialect.path == MEMORY:
                continue
            try:
                if self._wake_seq() != seq:
                    return True
            except StorageError:
                if self._dialect.closed:  # closed from another thread while we polled
                    return False
                raise

    def _wake_seq(self) -> int:
        with self._connection() as conn:
            seq: int = conn.execute(Q["wake_seq"]).fetchone()[0]
            return seq


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
