"""The HTTP API's tables on PostgreSQL: idempotency keys and API tokens (migration
0002_api.sql, queries in `api_queries.sql`).

They live in the job store's schema and go through its public `read()` and `write()` (its
pool, `search_path`, time zone and error translation included). Concurrent first requests
with one key race on `INSERT … ON CONFLICT DO NOTHING`: the primary key (tenant, key) lets
exactly one insert through; the others wait for it to commit, insert nothing, and read the
winner's row.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

import psycopg

from recoup.idempotency.keys import (
    DEFAULT_LOCK_TIMEOUT,
    InProgress,
    Mismatch,
    New,
    Outcome,
    Replay,
)
from recoup.storage.api_tables import RETRY_AFTER_SECONDS, SqlApiTables
from recoup.storage.job_rows import aware_utc
from recoup.storage.postgres.store import PostgresStore
from recoup.storage.sql_files import load_queries

Q = load_queries("recoup.storage.postgres", "api_queries.sql")

BEGIN_TRIES = 5  # a key released between our insert and our read: look again, briefly


class PostgresApiTables(SqlApiTables):
    """`IdempotencyStore` and `TokenStore` in the schema of a `PostgresStore`."""

    Q = Q
    _decode_instant = staticmethod(aware_utc)

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store)
        self._pg = store

    @staticmethod
    def _encode_instant(value: datetime) -> datetime:
        return value  # psycopg sends datetimes as timestamptz

    def _statement(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._pg.statements()

    def _reading(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._pg.statements()

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
        claim = {**ids, "fingerprint": fingerprint, "method": method, "path": path, "now": now}
        # A new key (the usual case) is one statement in autocommit: one round trip.
        with self._pg.statements() as conn:
            if conn.execute(Q["claim_key"], claim).fetchone() is not None:
                return New(locked_at=now)
        for _ in range(BEGIN_TRIES):
            with self._store.write() as conn:
                claimed = conn.execute(Q["claim_key"], claim).fetchone()
                if claimed is not None:
                    return New(locked_at=now)
                row = conn.execute(Q["get_key"], ids).fetchone()
                if row is None:
                    continue  # released meanwhile
                stored, locked_at, status, content_type, body = row
                if stored != fingerprint:
                    return Mismatch()
                if status is not None:
                    return Replay(status=status, body=bytes(body), content_type=content_type)
                if locked_at < now - lock_timeout:
                    # The request that held it died mid-flight: one taker wins the CAS.
                    taken = conn.execute(
                        Q["take_over_key"], {**ids, "now": now, "locked_at": locked_at}
                    ).fetchone()
                    if taken is not None:
                        return New(locked_at=now)
                return InProgress(retry_after=RETRY_AFTER_SECONDS)
        return InProgress(retry_after=RETRY_AFTER_SECONDS)
