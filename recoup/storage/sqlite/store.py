"""The SQLite backend: the embedded default, safe for several threads and processes on one
machine. `SqliteStore` assembles its parts: the dialect (`dialect.py`: connections, write
lock, group commit, wake-ups), the hot path (`queue.py`), worker sessions (`workers.py`: a
heartbeat row per running worker), migrations (`migrator.py`) and claiming an idempotency key
(`key_claims.py`); the table code written once over the dialect is `SqlStore`'s.
"""

from __future__ import annotations

from recoup.storage.sql_store import SqlStore, StoreParts
from recoup.storage.sqlite import job_creation, key_claims
from recoup.storage.sqlite.dialect import BUSY_TIMEOUT, QUERIES, SqliteDialect
from recoup.storage.sqlite.migrator import SqliteMigrator
from recoup.storage.sqlite.queue import SqliteQueue
from recoup.storage.sqlite.workers import SqliteWorkers


class SqliteStore(SqlStore):
    """Every store protocol (`recoup.storage.Store`) on one SQLite file (or `:memory:`)."""

    queries = QUERIES
    migrations_package = SqliteDialect.migrations_package

    def __init__(
        self,
        path: str,
        *,
        migrate: bool = True,
        busy_timeout: float = BUSY_TIMEOUT,
        synchronous: str = "FULL",
    ) -> None:
        """`synchronous="NORMAL"` trades the last commits on power loss (never on a process
        crash) for fewer fsyncs; FULL is the default because a lost insert is a lost job."""
        dialect = SqliteDialect(path, busy_timeout=busy_timeout, synchronous=synchronous)
        self.path = dialect.path
        super().__init__(
            StoreParts(
                dialect=dialect,
                queue=SqliteQueue(dialect),
                workers=SqliteWorkers(dialect),
                migrator=SqliteMigrator(dialect),
                claim_key=key_claims.claim_key,
                create_job=job_creation.create_job,
                close=(dialect.close,),
            )
        )
        if migrate:
            self.migrate()


__all__ = ["BUSY_TIMEOUT", "SqliteStore"]
