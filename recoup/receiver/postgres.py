"""The receiver's tables in the user's PostgreSQL database (psycopg 3 and its pool): the
PostgreSQL side of `recoup.receiver.database`, imported only by those who use it."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any, Final

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from recoup.errors import StorageError
from recoup.receiver.database import Database, load_queries
from recoup.timekeeping.instants import require_aware

POOL_TIMEOUT: Final = 30.0  # seconds to wait for a pooled PostgreSQL connection


class PostgresDatabase(Database["psycopg.Connection[Any]"]):
    """The receiver's tables in a PostgreSQL database reached through `pool` (the user's own
    pool, whose `search_path` decides the schema). `connect()` builds a pool of its own."""

    def __init__(self, pool: ConnectionPool[Any], *, owns_pool: bool = False) -> None:
        self.pool = pool
        self._owns_pool = owns_pool
        self.queries = load_queries("postgres.sql")

    @classmethod
    def connect(
        cls, conninfo: str, *, schema: str | None = None, max_size: int = 8
    ) -> PostgresDatabase:
        """A pool of up to `max_size` connections to `conninfo`, with `search_path` set to
        `schema` when one is given (it must exist). Closed by `close()`."""
        if schema is not None and not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise ValueError(f"schema: {schema!r}: expected a lower-case SQL identifier")
        kwargs: dict[str, Any] = {} if schema is None else {"options": f"-c search_path={schema}"}
        pool: ConnectionPool[Any] = ConnectionPool(
            conninfo, min_size=1, max_size=max_size, kwargs=kwargs, open=False
        )
        try:
            pool.open(wait=True, timeout=POOL_TIMEOUT)
        except PoolTimeout as exc:
            pool.close()
            raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc
        return cls(pool, owns_pool=True)

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            # transaction() works whatever the pool's autocommit setting: BEGIN … COMMIT.
            with self.pool.connection(timeout=POOL_TIMEOUT) as conn, conn.transaction():
                yield conn
        except PoolTimeout as exc:
            raise StorageError(f"no PostgreSQL connection available: {exc}") from exc
        except psycopg.Error as exc:
            raise StorageError(f"PostgreSQL: {exc}") from exc

    def transaction(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._transaction()

    def fetch(
        self, conn: psycopg.Connection[Any], name: str, params: Mapping[str, object]
    ) -> list[tuple[Any, ...]]:
        return conn.execute(self.queries[name], params).fetchall()

    def run(self, conn: psycopg.Connection[Any], name: str, params: Mapping[str, object]) -> int:
        return conn.execute(self.queries[name], params).rowcount

    def lock_invoice(self, conn: psycopg.Connection[Any], invoice_id: str) -> None:
        conn.execute(self.queries["lock_invoice"], {"invoice_id": invoice_id})

    def encode_instant(self, instant: datetime) -> datetime:
        return require_aware("instant", instant).astimezone(UTC)

    def decode_instant(self, value: Any) -> datetime:
        if not isinstance(value, datetime):
            raise TypeError(f"expected a timestamptz, got {value!r}")
        return value.astimezone(UTC)

    def ensure_schema(self) -> None:
        with self._transaction() as conn:
            conn.execute(self.queries["schema"])

    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()


__all__ = ["POOL_TIMEOUT", "PostgresDatabase"]
