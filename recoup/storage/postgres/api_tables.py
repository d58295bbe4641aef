"""The HTTP API's tables on PostgreSQL: idempotency keys and API tokens (migration
0002_api.sql, queries in `api_queries.sql`).

They live in the job store's schema and go through its public `read()` and `write()` (its
pool, `search_path`, time zone and error translation included). Concurrent first requests
with one key race on `INSERT … ON CONFLICT DO NOTHING`: the primary key (tenant, key) lets
exactly one insert through; the others wait for it to commit, insert nothing, and read the
winner's row.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from recoup.api.tokens import TenantInfo, TokenInfo
from recoup.idempotency.keys import (
    DEFAULT_LOCK_TIMEOUT,
    InProgress,
    Mismatch,
    New,
    Outcome,
    Replay,
)
from recoup.storage._api_rows import RETRY_AFTER_SECONDS, tenant_info_from_row, token_from_row
from recoup.storage._rows import aware_utc
from recoup.storage._sql import load_queries
from recoup.storage.postgres.store import PostgresStore

Q = load_queries("recoup.storage.postgres", "api_queries.sql")

BEGIN_TRIES = 5  # a key released between our insert and our read: look again, briefly


class PostgresApiTables:
    """`IdempotencyStore` and `TokenStore` in the schema of a `PostgresStore`."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def ping(self) -> None:
        """Raise `StorageError` unless the database answers."""
        with self._store.read() as conn:
            conn.execute("SELECT 1").fetchone()

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
        for _ in range(BEGIN_TRIES):
            with self._store.write() as conn:
                claimed = conn.execute(
                    Q["claim_key"],
                    {**ids, "fingerprint": fingerprint, "method": method, "path": path, "now": now},
                ).fetchone()
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

    def complete(
        self,
        *,
        tenant: str,
        key: str,
        locked_at: datetime,
        status: int,
        body: bytes,
        content_type: str,
    ) -> None:
        with self._store.write() as conn:
            conn.execute(
                Q["complete_key"],
                {
                    "tenant": tenant,
                    "key": key,
                    "locked_at": locked_at,
                    "status": status,
                    "content_type": content_type,
                    "body": body,
                },
            )

    def release(self, *, tenant: str, key: str, locked_at: datetime) -> None:
        with self._store.write() as conn:
            conn.execute(Q["release_key"], {"tenant": tenant, "key": key, "locked_at": locked_at})

    def prune_keys(self, *, older_than: datetime, limit: int = 10_000) -> int:
        with self._store.write() as conn:
            return conn.execute(Q["prune_keys"], {"before": older_than, "limit": limit}).rowcount

    # API tokens and tenants

    def add_token(
        self,
        *,
        token_id: str,
        tenant: str,
        token_hash: str,
        prefix: str,
        label: str | None,
        now: datetime,
    ) -> TokenInfo:
        with self._store.write() as conn:
            row = conn.execute(
                Q["insert_token"],
                {
                    "id": token_id,
                    "tenant": tenant,
                    "token_hash": token_hash,
                    "prefix": prefix,
                    "label": label,
                    "now": now,
                },
            ).fetchone()
        assert row is not None  # INSERT … RETURNING returns the row or raises
        return token_from_row(row, aware_utc)

    def tenant_for_token_hash(self, token_hash: str) -> str | None:
        with self._store.read() as conn:
            row = conn.execute(Q["tenant_for_token_hash"], {"token_hash": token_hash}).fetchone()
        return None if row is None else str(row[0])

    def list_tokens(self, tenant: str | None = None) -> list[TokenInfo]:
        with self._store.read() as conn:
            rows = conn.execute(Q["list_tokens"], {"tenant": tenant}).fetchall()
        return [token_from_row(row, aware_utc) for row in rows]

    def revoke_token(self, token_id: str, *, now: datetime) -> TokenInfo | None:
        with self._store.write() as conn:
            conn.execute(Q["revoke_token"], {"id": token_id, "now": now})
            row = conn.execute(Q["get_token"], {"id": token_id}).fetchone()
        return None if row is None else token_from_row(row, aware_utc)

    def list_tenants(self) -> list[TenantInfo]:
        with self._store.read() as conn:
            rows = conn.execute(Q["list_tenants"]).fetchall()
        return [tenant_info_from_row(row, aware_utc) for row in rows]
