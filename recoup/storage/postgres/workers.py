"""Worker sessions on PostgreSQL (ARCHITECTURE.md, 'Worker sessions'): a session is a
connection of its own that holds an advisory lock keyed by the worker's id for the worker's
whole life. A worker killed with SIGKILL loses its connection and with it the lock at once;
the server drops a connection whose client machine vanished within about
`KEEPALIVE_IDLE + KEEPALIVE_INTERVAL × KEEPALIVE_COUNT` seconds (TCP keepalives set on both
ends). A worker is dead when its lock is free and its heartbeat is older than the grace
(`SessionRules.grace`): the grace lets a live worker cut off from its connection (a
`pg_terminate_backend`, a restart of the database) connect again and take its lock back,
keeping its jobs, or else give them up, before anyone may hand them back. A worker whose lock
is held is never dead, however late its heartbeat: its jobs wait for their leases.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg

from recoup.errors import StorageError
from recoup.jobs.worker_records import Beat, SessionRules, WorkerInfo
from recoup.storage.postgres.dialect import QUERIES, PostgresDialect

Q = QUERIES

# Seconds: TCP keepalives of a session's connection, on both ends, so that a worker whose
# machine vanished (no FIN ever comes) loses its lock well within a lease.
KEEPALIVE_IDLE = 5
KEEPALIVE_INTERVAL = 2
KEEPALIVE_COUNT = 3
APPLICATION_NAME = "recoup-worker {id}"  # the session connection's, in pg_stat_activity


class PostgresWorkerSession:
    """One worker's session: its connection (autocommit) and the lock it holds."""

    def __init__(
        self,
        workers: PostgresWorkers,
        conn: psycopg.Connection[Any],
        worker_id: str,
        grace: timedelta,
    ) -> None:
        self._workers = workers
        self._conn = conn
        self._worker_id = worker_id
        self._grace = grace

    @property
    def expires_after(self) -> timedelta:
        return self._grace

    def beat(self) -> Beat:
        # A statement that succeeds on this connection proves the session alive, and a live
        # session still holds its lock (only its end releases a session-level lock).
        try:
            row = self._conn.execute(Q["beat_worker"], {"id": self._worker_id})
            return Beat.ALIVE if row.fetchone() is not None else Beat.GONE
        except psycopg.OperationalError as exc:
            if self._conn.broken or self._conn.closed:
                return Beat.LOST  # the connection, and with it the lock, is gone
            raise StorageError(f"PostgreSQL: {exc}") from exc
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL: {exc}") from exc

    def hand_back(self, *, now: datetime) -> list[str]:
        try:
            with self._conn.transaction():
                handed = self._workers.hand_back(self._conn, [self._worker_id], now)
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL: {exc}") from exc
        return [job_id for job_id, _ in handed]

    def close(self) -> None:
        try:
            self._conn.execute(Q["delete_workers"], {"ids": [self._worker_id]})
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL: {exc}") from exc
        finally:
            self._conn.close()  # releases the lock

    def drop(self) -> None:
        self._conn.close()


class PostgresWorkers:
    """Worker sessions over a `PostgresDialect`: a connection of its own per session, holding
    the worker's advisory lock; finding dead workers and handing their jobs back."""

    def __init__(self, dialect: PostgresDialect) -> None:
        self._dialect = dialect

    def open_worker_session(
        self,
        worker: WorkerInfo,
        *,
        now: datetime,
        rules: SessionRules,
        replacing: bool = False,
    ) -> PostgresWorkerSession | None:
        kwargs = self._dialect.connect_kwargs()
        options = (
            f"{kwargs.pop('options', '')} -c tcp_keepalives_idle={KEEPALIVE_IDLE}"
            f" -c tcp_keepalives_interval={KEEPALIVE_INTERVAL}"
            f" -c tcp_keepalives_count={KEEPALIVE_COUNT}"
            # A heartbeat lost in a crash of the database proves nothing: do not wait for
            # the WAL flush. Never let the server end the idle session (and free the lock).
            " -c synchronous_commit=off -c idle_session_timeout=0"
        )
        try:
            conn = psycopg.connect(
                self._dialect.url,
                autocommit=True,
                options=options,
                application_name=APPLICATION_NAME.format(id=worker.id)[:63],
                keepalives=1,
                keepalives_idle=KEEPALIVE_IDLE,
                keepalives_interval=KEEPALIVE_INTERVAL,
                keepalives_count=KEEPALIVE_COUNT,
                **kwargs,
            )
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL: {exc}") from exc
        try:
            row = conn.execute(Q["lock_worker"], {"id": worker.id}).fetchone()
            if row is None or not row[0]:
                conn.close()  # a live session holds the id (or an observer hands it back)
                return None
            with conn.transaction():
                if not replacing:
                    # Whatever still runs under this id belongs to a previous session: the
                    # lock says none of it runs now.
                    self.hand_back(conn, [worker.id], now)
                conn.execute(
                    Q["register_worker"],
                    {
                        "id": worker.id,
                        "host": worker.host,
                        "pid": worker.pid,
                        "process_key": worker.process_key,
                    },
                )
        except psycopg.Error as exc:
            conn.close()
            raise StorageError(f"PostgreSQL: {exc}") from exc
        return PostgresWorkerSession(self, conn, worker.id, rules.grace)

    def rescue_dead_workers(
        self, *, now: datetime, rules: SessionRules, limit: int = 100
    ) -> dict[str, list[str]]:
        with self._dialect.connection() as conn:
            rows = conn.execute(
                Q["dead_workers"], {"grace": rules.grace, "limit": limit}, prepare=False
            ).fetchall()
            dead = [row[0] for row in rows]
            if not dead:
                return {}
            handed = self.hand_back(conn, dead, now)
            conn.execute(Q["delete_workers"], {"ids": dead})
        found: dict[str, list[str]] = {worker_id: [] for worker_id in dead}
        for job_id, worker_id in handed:
            found[worker_id].append(job_id)
        return found

    def hand_back(
        self, conn: psycopg.Connection[Any], workers: list[str], now: datetime
    ) -> list[tuple[str, str]]:
        """Hand back the running jobs of `workers` (in the caller's transaction); (job id,
        worker id) each."""
        conn.execute(Q["queue_plans"])
        rows = conn.execute(
            Q["hand_back_jobs"], {"workers": workers, "now": now}, prepare=False
        ).fetchall()
        if rows:
            self._dialect.wake_workers(conn)
        return [(row[0], row[1]) for row in rows]


__all__ = ["APPLICATION_NAME", "PostgresWorkerSession", "PostgresWorkers"]
