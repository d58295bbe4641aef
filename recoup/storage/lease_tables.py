"""A worker's leases on the jobs it claimed, on both backends, written once over the dialect:
heartbeats (extending the leases still held) and releases (handing jobs back unstarted). Each
is one statement in one write transaction, after the dialect's queue plans and run as a batch
(`Dialect.plan_queue`, `Dialect.execute_batch`), with its ids as one parameter; the drivers do
not differ here, unlike claims and completions (each backend's `queue`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from recoup.storage.dialect import Dialect
from recoup.storage.rules import attempt_keys


class SqlLeaseTables:
    """`JobStore.heartbeat` and `JobStore.release` over a dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._sql = dialect.queries

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
        dialect = self._dialect
        keys = attempt_keys(job_ids, attempts)
        params = {
            "ids": dialect.encode_texts(job_ids),
            "keys": None if keys is None else dialect.encode_texts(keys),
            "worker_id": worker_id,
            "lease_until": dialect.encode_instant(lease_until),
        }
        with dialect.write() as conn:
            dialect.plan_queue(conn)
            rows = dialect.execute_batch(conn, self._sql["heartbeat"], params).fetchall()
        return [row[0] for row in rows]

    def release(self, worker_id: str, job_ids: Sequence[str], *, now: datetime) -> int:
        if not job_ids:
            return 0
        dialect = self._dialect
        params = {
            "ids": dialect.encode_texts(job_ids),
            "worker_id": worker_id,
            "now": dialect.encode_instant(now),
        }
        with dialect.write() as conn:
            dialect.plan_queue(conn)
            released: int = dialect.execute_batch(conn, self._sql["release"], params).rowcount
            if released:
                dialect.wake_workers(conn)
        if released:
            dialect.jobs_inserted()
        return released


__all__ = ["SqlLeaseTables"]
