"""The API tables (idempotency keys and API tokens, migration 0002) on both backends: the
mapping between token records and rows, and the table operations (`SqlApiTables`) shared by
the SQLite and PostgreSQL `api_tables`; as in `job_rows`, only the instant codec (and the SQL
of each query, in each backend's `api_queries.sql`) differs by backend, and `begin`, whose
concurrency handling is per dialect."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from recoup.storage.job_rows import DecodeInstant
from recoup.storage.sql_store import SqlStore
from recoup.tenancy import TokenInfo, TokenOwner

T = TypeVar("T")

RETRY_AFTER_SECONDS = 1  # an in-flight request usually ends within milliseconds


def token_from_row(row: Sequence[Any], instant: DecodeInstant) -> TokenInfo:
    """A row of `id, tenant, prefix, label, created_at, revoked_at` (the `*_token` queries)."""
    return TokenInfo(
        id=row[0],
        tenant=row[1],
        prefix=row[2],
        label=row[3],
        created_at=instant(row[4]),
        revoked_at=None if row[5] is None else instant(row[5]),
    )


class SqlApiTables:
    """The backend-independent part of `SqliteApiTables` and `PostgresApiTables`: every
    operation but `begin` (whose concurrency handling is per-dialect), written against the
    store's `read()` / `write()`, the backend's `Q` and its instant codec. What
    `Store.api_tables()` returns (`recoup.storage.ApiTables`)."""

    Q: ClassVar[Mapping[str, str]]

    def __init__(self, store: SqlStore) -> None:
        self._store = store

    @staticmethod
    def _encode_instant(value: datetime, /) -> Any:
        """An instant as a query parameter."""
        raise NotImplementedError

    @staticmethod
    def _decode_instant(value: Any, /) -> datetime:
        """An instant from a column."""
        raise NotImplementedError

    def _statement(self) -> AbstractContextManager[Any]:
        """A connection for an operation that is one statement: the store's `write()` by
        default; PostgreSQL runs it in autocommit (one round trip, no BEGIN and COMMIT)."""
        return self._store.write()

    def _reading(self) -> AbstractContextManager[Any]:
        """A connection for a read that is one statement: the store's `read()` by default."""
        return self._store.read()

    def ping(self) -> None:
        """Raise `StorageError` unless the database answers."""
        self._store.ping()

    # Idempotency keys (`begin` is per backend)

    def atomically(self, fn: Callable[[], T]) -> T:
        """`fn` as one transaction of the store (see `SqliteStore.atomically` and
        `PostgresStore.atomically`)."""
        return self._store.atomically(fn)

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
        with self._statement() as conn:
            conn.execute(
                self.Q["complete_key"],
                {
                    "tenant": tenant,
                    "key": key,
                    "locked_at": self._encode_instant(locked_at),
                    "status": status,
                    "content_type": content_type,
                    "body": body,
                },
            )

    def release(self, *, tenant: str, key: str, locked_at: datetime) -> None:
        params = {"tenant": tenant, "key": key, "locked_at": self._encode_instant(locked_at)}
        with self._statement() as conn:
            conn.execute(self.Q["release_key"], params)

    def prune_keys(self, *, older_than: datetime, limit: int = 10_000) -> int:
        params = {"before": self._encode_instant(older_than), "limit": limit}
        with self._store.write() as conn:
            pruned: int = conn.execute(self.Q["prune_keys"], params).rowcount
        return pruned

    # API tokens

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
                self.Q["insert_token"],
                {
                    "id": token_id,
                    "tenant": tenant,
                    "token_hash": token_hash,
                    "prefix": prefix,
                    "label": label,
                    "now": self._encode_instant(now),
                },
            ).fetchone()
        assert row is not None  # INSERT … RETURNING returns the row or raises
        return token_from_row(row, self._decode_instant)

    def token_owner(self, token_hash: str) -> TokenOwner | None:
        # Read afresh on every request, never cached: a revoked token, or a disabled tenant's,
        # is refused at once.
        with self._reading() as conn:
            row = conn.execute(self.Q["token_owner"], {"token_hash": token_hash}).fetchone()
        return None if row is None else TokenOwner(tenant=str(row[0]), disabled=bool(row[1]))

    def list_tokens(self, tenant: str | None = None) -> list[TokenInfo]:
        with self._store.read() as conn:
            rows = conn.execute(self.Q["list_tokens"], {"tenant": tenant}).fetchall()
        instant = self._decode_instant
        return [token_from_row(row, instant) for row in rows]

    def revoke_token(self, token_id: str, *, now: datetime) -> TokenInfo | None:
        with self._store.write() as conn:
            conn.execute(self.Q["revoke_token"], {"id": token_id, "now": self._encode_instant(now)})
            row = conn.execute(self.Q["get_token"], {"id": token_id}).fetchone()
        return None if row is None else token_from_row(row, self._decode_instant)
