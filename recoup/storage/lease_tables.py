"""A worker's leases on the jobs it claimed, on both backends, written once over the dialect:
heartbeats (extending the leases still held, past the caller's clock or the database's:
ARCHITECTURE.md, 'Clock skew') and releases (handing jobs back unstarted). Each
is one statement in one write transaction, after the dialect's queue plans and run as a batch
(`Dialect.plan_queue`, `Dialect.execute_batch`), with its ids as one parameter; the drivers do
not differ here, unlike claims and completions (each backend's `queue`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

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
        lease_until: datetime | None = None,
        lease_for: timedelta | None = None,
        attempts: Sequence[int] | None = None,
    ) -> list[str]:
        if (lease_until is None) == (lease_for is None):
            raise ValueError("heartbeat: give lease_until or lease_for, exactly one")
        if not job_ids:
            return []
        dialect = self._dialect
        keys = attempt_keys(job_ids, attempts)
        with dialect.write() as conn:
            if lease_for is not None:  # past the database's clock, not the caller's
                lease_until = dialect.read_clock(conn) + lease_for
            assert lease_until is not None
            params = {
                "ids": dialect.encode_texts(job_ids),
                "keys": None if keys is None else dialect.encode_texts(keys),
                "worker_id": worker_id,
                "lease_until": dialect.encode_instant(lease_until),
            }
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
