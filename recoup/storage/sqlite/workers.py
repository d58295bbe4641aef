"""Worker sessions on SQLite (ARCHITECTURE.md, 'Worker sessions'): a registration row per
running worker, its heartbeat stamped twice a second by the machine's clock (every process on
one SQLite file shares it), through a connection of its own that does not wait for fsync (a
heartbeat lost in a power cut proves nothing).

Every process on the file is on one machine, so a worker is usually judged by its process
(`recoup.jobs.processes`): gone, a zombie or its PID reused → dead at once, whatever its
heartbeat; seen running → alive, however late its heartbeat (its jobs wait for their leases).
Only a process this one cannot look up (another PID namespace: a container sharing the file)
is judged by its heartbeat: dead once older than `SessionRules.dead_after`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from recoup.jobs.processes import process_alive
from recoup.jobs.worker_records import Beat, SessionRules, WorkerInfo
from recoup.storage.job_rows import ONE_US, micros
from recoup.storage.sqlite.dialect import QUERIES, SqliteDialect

Q = QUERIES


def _clock_us() -> int:
    """The machine's clock, which stamps and judges heartbeats (never the due clock)."""
    return time.time_ns() // 1000


def _dead(pid: int, key: str | None, heartbeat_us: int, dead_after: timedelta) -> bool:
    alive = process_alive(pid, key)
    if alive is not None:
        return not alive
    return heartbeat_us < _clock_us() - dead_after // ONE_US


class SqliteWorkerSession:
    """One worker's registration and the connection that beats it."""

    def __init__(
        self,
        workers: SqliteWorkers,
        conn: sqlite3.Connection | None,
        worker: WorkerInfo,
        dead_after: timedelta,
    ) -> None:
        self._workers = workers
        self._dialect = workers.dialect
        self._conn = conn
        self._worker = worker
        self._dead_after = dead_after

    @property
    def expires_after(self) -> timedelta:
        return self._dead_after

    def _key(self) -> dict[str, object]:
        w = self._worker
        return {"id": w.id, "pid": w.pid, "process_key": w.process_key}

    def beat(self) -> Beat:
        with self._dialect.transaction(self._conn) as conn:
            row = conn.execute(Q["beat_worker"], {**self._key(), "now": _clock_us()}).fetchone()
        # No row: found dead, or its id taken over (the registration is all the session is).
        return Beat.ALIVE if row is not None else Beat.GONE

    def hand_back(self, *, now: datetime) -> list[str]:
        with self._dialect.transaction(self._conn) as conn:
            if conn.execute(Q["get_own_worker"], self._key()).fetchone() is None:
                return []  # no longer ours: whoever took the id over handled its jobs
            handed = self._workers.hand_back(conn, [self._worker.id], now)
        if handed:
            self._dialect.jobs_inserted()
        return [job_id for job_id, _ in handed]

    def close(self) -> None:
        try:
            with self._dialect.transaction(self._conn) as conn:
                conn.execute(Q["delete_own_worker"], self._key())
        finally:
            self.drop()

    def drop(self) -> None:
        self._dialect.close_connection(self._conn)
        self._conn = None


class SqliteWorkers:
    """Worker sessions over a `SqliteDialect`: registering, judging and rescuing workers."""

    def __init__(self, dialect: SqliteDialect) -> None:
        self.dialect = dialect

    def open_worker_session(
        self,
        worker: WorkerInfo,
        *,
        now: datetime,
        rules: SessionRules,
        replacing: bool = False,
    ) -> SqliteWorkerSession | None:
        conn = self.dialect.own_connection("NORMAL")
        handed: list[tuple[str, str]] = []
        try:
            with self.dialect.transaction(conn) as c:
                row = c.execute(Q["get_worker"], {"id": worker.id}).fetchone()
                held = False
                if row is not None:
                    pid, key, heartbeat = row
                    if (pid, key) == (worker.pid, worker.process_key):
                        held = not replacing  # another worker of this very process holds it
                    else:
                        held = not _dead(pid, key, heartbeat, rules.dead_after)
                if not held:
                    if not replacing:
                        # Whatever still runs under this id belongs to a dead previous session.
                        handed = self.hand_back(c, [worker.id], now)
                    c.execute(
                        Q["register_worker"],
                        {
                            "id": worker.id,
                            "host": worker.host,
                            "pid": worker.pid,
                            "process_key": worker.process_key,
                            "now": _clock_us(),
                        },
                    )
        except BaseException:
            self.dialect.close_connection(conn)
            raise
        if held:
            self.dialect.close_connection(conn)
            return None
        if handed:
            self.dialect.jobs_inserted()
        return SqliteWorkerSession(self, conn, worker, rules.dead_after)

    def rescue_dead_workers(
        self, *, now: datetime, rules: SessionRules, limit: int = 100
    ) -> dict[str, list[str]]:
        # Read without the write lock first: usually nobody is dead, and then no write happens.
        if not self._find_dead(rules, limit, None):
            return {}
        with self.dialect.transaction() as conn:
            dead = self._find_dead(rules, limit, conn)  # again: a heartbeat may have come
            if not dead:
                return {}
            handed = self.hand_back(conn, dead, now)
            conn.execute(Q["delete_workers"], {"ids": json.dumps(dead)})
        if handed:
            self.dialect.jobs_inserted()
        found: dict[str, list[str]] = {worker_id: [] for worker_id in dead}
        for job_id, worker_id in handed:
            found[worker_id].append(job_id)
        return found

    def _find_dead(
        self, rules: SessionRules, limit: int, conn: sqlite3.Connection | None
    ) -> list[str]:
        if conn is None:
            with self.dialect.connection() as read:
                rows = read.execute(Q["worker_liveness"]).fetchall()
        else:
            rows = conn.execute(Q["worker_liveness"]).fetchall()
        dead = [row[0] for row in rows if _dead(row[1], row[2], row[3], rules.dead_after)]
        return dead[:limit]

    def hand_back(
        self, conn: sqlite3.Connection, workers: Sequence[str], now: datetime
    ) -> list[tuple[str, str]]:
        """Hand back the running jobs of `workers` by the rescue rule (in the caller's write
        transaction); (job id, worker id) each. The caller notifies waiters after commit."""
        rows = conn.execute(
            Q["running_jobs_of_workers"], {"workers": json.dumps(list(workers))}
        ).fetchall()
        if rows:
            params = {"ids": json.dumps([row[0] for row in rows]), "now": micros(now), "session": 1}
            conn.execute(Q["log_lost_attempts"], params)
            conn.execute(Q["rescue_jobs"], params)
            conn.execute(Q["bump_wakeups"])
        return [(row[0], row[1]) for row in rows]


__all__ = ["SqliteWorkerSession", "SqliteWorkers"]
