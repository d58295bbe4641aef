"""The PostgreSQL queue's LISTEN connection: one that fails is closed, never left open for the
garbage collector (whose warning, raised in some later test, names the wrong one)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from recoup.errors import StorageError
from tests.storage.databases import MigratedSchemas

pytestmark = pytest.mark.postgres


def test_a_listen_that_fails_closes_its_connection(
    postgres_url: str, postgres_schemas: MigratedSchemas, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recoup.storage.postgres.store import PostgresStore

    schema = postgres_schemas.take()
    store = PostgresStore(postgres_url, schema=schema)
    connected: list[psycopg.Connection[Any]] = []
    real_connect, real_execute = psycopg.connect, psycopg.Connection.execute

    def connect(*args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
        conn = real_connect(*args, **kwargs)
        connected.append(conn)
        return conn

    def execute(conn: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query.as_string(conn) if hasattr(query, "as_string") else str(query)
        if text.startswith("LISTEN"):
            raise psycopg.OperationalError("LISTEN refused")
        return real_execute(conn, query, *args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", connect)
    monkeypatch.setattr(psycopg.Connection, "execute", execute)
    try:
        with pytest.raises(StorageError, match="LISTEN refused"):
            store.wait_for_notify(0.01)
        assert len(connected) == 1
        assert connected[0].closed
    finally:
        monkeypatch.undo()
        store.close()
        postgres_schemas.give_back(schema)
