"""The PostgreSQL backend: production, many API servers and workers on many hosts.
`PostgresStore` assembles its parts: the dialect (`dialect.py`: the pool, `search_path` and
UTC, transactions and autocommit statements), the hot path (`queue.py`: claims with `SKIP
LOCKED`, COPY, LISTEN), worker sessions (`workers.py`: a connection holding an advisory lock per
running worker), migrations (`migrator.py`) and claiming an idempotency key (`key_claims.py`);
the table code written once over the dialect is `SqlStore`'s.
"""

from __future__ import annotations

from recoup.storage.postgres import job_creation, key_claims
from recoup.storage.postgres.dialect import (
    DEFAULT_SCHEMA,
    PROBE_TIMEOUT,
    QUERIES,
    PostgresDialect,
)
from recoup.storage.postgres.migrator import PostgresMigrator
from recoup.storage.postgres.queue import COPY_THRESHOLD, PostgresQueue
from recoup.storage.postgres.workers import PostgresWorkers
from recoup.storage.sql_store import SqlStore, StoreParts


class PostgresStore(SqlStore):
    """Every store protocol (`recoup.storage.Store`) on PostgreSQL, every table in `schema`."""

    queries = QUERIES
    migrations_package = PostgresDialect.migrations_package

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        migrate: bool = True,
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        dialect = PostgresDialect(url, schema=schema, min_size=min_size, max_size=max_size)
        self.url = url
        self.channel = dialect.channel
        queue = PostgresQueue(dialect)
        super().__init__(
            StoreParts(
                dialect=dialect,
                queue=queue,
                workers=PostgresWorkers(dialect),
                migrator=PostgresMigrator(dialect),
                claim_key=key_claims.claim_key,
                create_job=job_creation.create_job,
                close=(queue.close, dialect.close),
            )
        )
        if migrate:
            try:
                self.migrate()
            except BaseException:
                self.close()
                raise


__all__ = ["COPY_THRESHOLD", "DEFAULT_SCHEMA", "PROBE_TIMEOUT", "PostgresStore"]
