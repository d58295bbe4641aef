"""The worker's side of the PostgreSQL job store, its hot path: claims, completions, heartbeats,
releases and rescues, each one statement per batch after `queue_plans` and run with
`prepare=False` (see `store.py`), and waiting for new jobs (LISTEN on a dedicated connection).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar

import psycopg
from psycopg import sql

from recoup.errors import StorageError
from recoup.jobs.model import ERROR_LIMIT, RESPONSE_EXCERPT_LIMIT, Completion, Job, NewJob
from recoup.jobs.store import ClaimParams
from recoup.storage import job_rows, row_decoding
from recoup.storage.job_rows import aware_utc
from recoup.storage.rules import (
    ENDED,
    FINAL_STATE_OF,
    attempt_keys,
    clip,
    latest_completions,
    outcome_is_retry,
)

LISTEN_SLICE = 0.25  # seconds: how long `close` may wait for a waiting `wait_for_notify`


class PostgresQueue:
    """The worker's operations of `PostgresStore`, over its pooled connections (`_conn`),
    queries (`Q`) and notification channel."""

    Q: ClassVar[Mapping[str, str]]
    url: str
    channel: str
    _listener: psycopg.Connection[Any] | None
    _listener_lock: threading.Lock
    _closing: bool

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection in a transaction, committed on success (`PostgresStore`)."""
        raise NotImplementedError

    def _connect_kwargs(self) -> dict[str, Any]:
        """The options of every connection, the listener's too (`PostgresStore`)."""
        raise NotImplementedError

    def _insert_rows(
        self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], now: datetime
    ) -> int:
        raise NotImplementedError  # `PostgresStore`: insert jobs, skipping clashes

    def claim_due(self, params: ClaimParams) -> list[Job]:
        if params.limit <= 0:
            return []
        Q = self.Q
        with self._conn() as conn:
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
                    "limit": params.limit,
                },
                prepare=False,
                binary=True,
            ).fetchall()
        jobs = [row_decoding.job_from_row(row, aware_utc) for row in rows]
        jobs.sort(key=lambda job: (job.run_at, job.id))
        return jobs

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
        Q = self.Q
        with self._conn() as conn:
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
        Q = self.Q
        with self._conn() as conn:
            conn.execute(Q["queue_plans"])
            rows = conn.execute(Q["heartbeat"], params, prepare=False).fetchall()
        return [row[0] for row in rows]

    def release(self, worker_id: str, job_ids: Sequence[str], *, now: datetime) -> int:
        if not job_ids:
            return 0
        Q = self.Q
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
        Q = self.Q
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
            row = conn.execute(self.Q["next_due_at"]).fetchone()
        return None if row is None or row[0] is None else aware_utc(row[0])

    def due_backlog(self, now: datetime) -> int:
        with self._conn() as conn:
            row = conn.execute(self.Q["due_backlog"], {"now": now}).fetchone()
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
