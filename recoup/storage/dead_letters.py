"""The dead letters on both backends: jobs that failed for good, redriven (scheduled again with
a fresh budget of attempts) or deleted (QStash's DLQ). Listing them is `list_jobs` with
`state=failed`. Written once over the dialect and its `redrive_job` and `delete_failed_job`
queries; `SqliteStore` and `PostgresStore` hold one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from recoup.jobs.model import Job
from recoup.jobs.redrive import REDRIVE_BATCH, FailedFilter
from recoup.storage import row_decoding
from recoup.storage.dialect import Dialect


class SqlDeadLetters:
    """`JobStore.redrive`, `count_failed`, `redrive_failed` and `delete_failed` over a
    dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._sql = dialect.queries

    def redrive(self, tenant: str, job_id: str, *, now: datetime) -> Job | None:
        params = {"tenant": tenant, "id": job_id, "now": self._dialect.encode_instant(now)}
        with self._dialect.write() as conn:
            row = conn.execute(self._sql["redrive_job"], params).fetchone()
            if row is None:
                return None
            self._dialect.wake_workers(conn)
        self._dialect.jobs_inserted()
        return row_decoding.job_from_row(row, self._dialect.decode_instant)

    def _filter_params(self, found: FailedFilter) -> dict[str, Any]:
        encode = self._dialect.encode_instant
        return {
            "tenant": found.tenant,
            "job_group": found.group,
            "name_prefix": found.name_prefix,
            "since": None if found.since is None else encode(found.since),
            "until": None if found.until is None else encode(found.until),
            "error": found.error,
        }

    def count_failed(self, found: FailedFilter) -> int:
        with self._dialect.read() as conn:
            row = conn.execute(
                self._sql["count_failed_matching"], self._filter_params(found)
            ).fetchone()
        return int(row[0])

    def redrive_failed(self, found: FailedFilter, *, now: datetime) -> tuple[int, int]:
        """Redrive every failed job `found` names, in the order they failed, `REDRIVE_BATCH`
        per transaction: (matched, redriven)."""
        with self._dialect.read() as conn:
            ids = [
                row[0]
                for row in conn.execute(
                    self._sql["failed_matching_ids"], self._filter_params(found)
                ).fetchall()
            ]
        at = self._dialect.encode_instant(now)
        redriven = 0
        for start in range(0, len(ids), REDRIVE_BATCH):
            with self._dialect.write() as conn:
                for job_id in ids[start : start + REDRIVE_BATCH]:
                    params = {"tenant": found.tenant, "id": job_id, "now": at}
                    if conn.execute(self._sql["redrive_job"], params).fetchone() is not None:
                        redriven += 1
                if redriven:
                    self._dialect.wake_workers(conn)
        if redriven:
            self._dialect.jobs_inserted()
        return len(ids), redriven

    def delete_failed(self, tenant: str, job_id: str) -> bool:
        with self._dialect.write() as conn:
            deleted: int = conn.execute(
                self._sql["delete_failed_job"], {"tenant": tenant, "id": job_id}
            ).rowcount
        return bool(deleted)


__all__ = ["SqlDeadLetters"]
