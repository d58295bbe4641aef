"""The dead letters on both backends: jobs that failed for good, redriven (scheduled again with
a fresh budget of attempts) or deleted (QStash's DLQ). Listing them is `list_jobs` with
`state=failed`. Written once over the dialect and its `redrive_job` and `delete_failed_job`
queries; `SqliteStore` and `PostgresStore` hold one."""

from __future__ import annotations

from datetime import datetime

from recoup.jobs.model import Job
from recoup.storage import row_decoding
from recoup.storage.dialect import Dialect


class SqlDeadLetters:
    """`JobStore.redrive` and `JobStore.delete_failed` over a dialect."""

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

    def delete_failed(self, tenant: str, job_id: str) -> bool:
        with self._dialect.write() as conn:
            deleted: int = conn.execute(
                self._sql["delete_failed_job"], {"tenant": tenant, "id": job_id}
            ).rowcount
        return bool(deleted)


__all__ = ["SqlDeadLetters"]
