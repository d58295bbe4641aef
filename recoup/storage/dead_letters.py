"""The dead letters on both backends: jobs that failed for good, redriven (scheduled again with
a fresh budget of attempts) or deleted (QStash's DLQ). Listing them is `list_jobs` with
`state=failed`. Written once over `SqlStore`'s hooks and the backend's `redrive_job` and
`delete_failed_job` queries; `SqliteStore` and `PostgresStore` inherit it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from recoup.jobs.model import Job
from recoup.storage import row_decoding
from recoup.storage.sql_store import SqlStore


class SqlDeadLetters(SqlStore):
    """`JobStore.redrive` and `JobStore.delete_failed`, shared by both backends."""

    def _wake_workers(self, conn: Any) -> None:
        """Inside a transaction that made jobs due: let idle workers know once it commits."""
        raise NotImplementedError

    def redrive(self, tenant: str, job_id: str, *, now: datetime) -> Job | None:
        params = {"tenant": tenant, "id": job_id, "now": self._encode_instant(now)}
        with self.write() as conn:
            row = conn.execute(self.Q["redrive_job"], params).fetchone()
            if row is None:
                return None
            self._wake_workers(conn)
        self._jobs_inserted()
        return row_decoding.job_from_row(row, self._decode_instant)

    def delete_failed(self, tenant: str, job_id: str) -> bool:
        with self.write() as conn:
            deleted: int = conn.execute(
                self.Q["delete_failed_job"], {"tenant": tenant, "id": job_id}
            ).rowcount
        return bool(deleted)


__all__ = ["SqlDeadLetters"]
