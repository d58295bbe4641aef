"""The HTTP API's tables on SQLite: idempotency keys and API tokens (migration 0002_api.sql,
queries in `api_queries.sql`).

They live in the job store's database and go through its public `read()` and `write()` (one
connection per thread, `BEGIN IMMEDIATE`, the same busy timeout; `:memory:` works too), so
concurrent first requests with one key are serialised by SQLite's write lock, with the
primary key as the backstop.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from recoup.idempotency.keys import (
    DEFAULT_LOCK_TIMEOUT,
    InProgress,
    Mismatch,
    New,
    Outcome,
    Replay,
)
from recoup.storage.api_tables import RETRY_AFTER_SECONDS, SqlApiTables
from recoup.storage.job_rows import from_micros, micros
from recoup.storage.sql_files import load_queries
from recoup.storage.sqlite.store import SqliteStore

Q = load_queries("recoup.storage.sqlite", "api_queries.sql")


class SqliteApiTables(SqlApiTables):
    """`IdempotencyStore` and `TokenStore` in the database of a `SqliteStore`."""

    Q = Q
    _encode_instant = staticmethod(micros)
    _decode_instant = staticmethod(from_micros)

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(store)

    # Idempotency keys

    def begin(
        self,
        *,
        tenant: str,
        key: str,
        fingerprint: str,
        method: str,
        path: str,
        now: datetime,
        lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
    ) -> Outcome:
        ids = {"tenant": tenant, "key": key}
        now_us = micros(now)
        with self._store.write() as conn:
            claimed = conn.execute(
                Q["claim_key"],
                {**ids, "fingerprint": fingerprint, "method": method, "path": path, "now": now_us},
            ).rowcount
            if claimed:
                return New(locked_at=now)
            stored, locked_at, status, content_type, body = conn.execute(
                Q["get_key"], ids
            ).fetchone()
            if stored != fingerprint:
                return Mismatch()
            if status is not None:
                return Replay(status=status, body=bytes(body), content_type=content_type)
            if locked_at < micros(now - lock_timeout):
                # The request that held it died mid-flight: this one takes over.
                conn.execute(Q["take_over_key"], {**ids, "now": now_us, "locked_at": locked_at})
                return New(locked_at=now)
            return InProgress(retry_after=RETRY_AFTER_SECONDS)
