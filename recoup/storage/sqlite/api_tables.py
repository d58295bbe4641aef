"""The HTTP API's tables on SQLite: idempotency keys and API tokens (migration 0002_api.sql,
queries in `api_queries.sql`).

They live in the job store's database and go through its public `read()` and `write()` (one
connection per thread, `BEGIN IMMEDIATE`, the same busy timeout; `:memory:` works too), so
concurrent first requests with one key are serialised by SQLite's write lock, with the
primary key as the backstop.
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
from recoup.storage._rows import from_micros, micros
from recoup.storage._sql import load_queries
from recoup.storage.sqlite.store import SqliteStore

Q = load_queries("recoup.storage.sqlite", "api_queries.sql")


class SqliteApiTables:
    """`IdempotencyStore` and `TokenStore` in the database of a `SqliteStore`."""

    def __init__(self, store: SqliteStore) -> None:
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
                    "locked_at": micros(locked_at),
                    "status": status,
                    "content_type": content_type,
                    "body": body,
                },
            )

    def release(self, *, tenant: str, key: str, locked_at: datetime) -> None:
        with self._store.write() as conn:
            conn.execute(
                Q["release_key"], {"tenant": tenant, "key": key, "locked_at": micros(locked_at)}
            )

    def prune_keys(self, *, older_than: datetime, limit: int = 10_000) -> int:
        with self._store.write() as conn:
            pruned: int = conn.execute(
                Q["prune_keys"], {"before": micros(older_than), "limit": limit}
            ).rowcount
        return pruned

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
                    "now": micros(now),
                },
            ).fetchone()
        return token_from_row(row, from_micros)

    def tenant_for_token_hash(self, token_hash: str) -> str | None:
        with self._store.read() as conn:
            row = conn.execute(Q["tenant_for_token_hash"], {"token_hash": token_hash}).fetchone()
        return None if row is None else str(row[0])

    def list_tokens(self, tenant: str | None = None) -> list[TokenInfo]:
        with self._store.read() as conn:
            rows = conn.execute(Q["list_tokens"], {"tenant": tenant}).fetchall()
        return [token_from_row(row, from_micros) for row in rows]

    def revoke_token(self, token_id: str, *, now: datetime) -> TokenInfo | None:
        with self._store.write() as conn:
            conn.execute(Q["revoke_token"], {"id": token_id, "now": micros(now)})
            row = conn.execute(Q["get_token"], {"id": token_id}).fetchone()
        return None if row is None else token_from_row(row, from_micros)

    def list_tenants(self) -> list[TenantInfo]:
        with self._store.read() as conn:
            rows = conn.execute(Q["list_tenants"]).fetchall()
        return [tenant_info_from_row(row, from_micros) for row in rows]
