"""Migration 0002 (the API's tables) on both backends: the declared columns and indexes, and
the invariants its CHECK constraints hold."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from recoup.storage.sqlite.store import SqliteStore

DECLARED = {
    "idempotency_keys": {
        "tenant", "key", "fingerprint", "method", "path", "created_at", "locked_at", "status",
        "content_type", "body",
    },
    "api_tokens": {"id", "tenant", "token_hash", "prefix", "label", "created_at", "revoked_at"},
}  # fmt: skip
DECLARED_INDEXES = {
    "idempotency_keys": {"idempotency_keys_created_at"},
    "api_tokens": {"api_tokens_tenant"},
}


def _execute(store: Any, statement: str) -> None:
    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as conn:
            conn.execute(statement)
        return
    import psycopg

    with psycopg.connect(store.url, options=f"-c search_path={store.schema}") as conn:
        conn.execute(statement.encode())


def _columns_and_indexes(store: Any, table: str) -> tuple[set[str], set[str]]:
    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as conn:
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            indexes = {
                row[1]
                for row in conn.execute(f"PRAGMA index_list({table})")
                if not row[1].startswith("sqlite_autoindex")
            }
        return columns, indexes
    import psycopg

    with psycopg.connect(store.url) as conn:
        columns = {
            row[0]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = %s AND table_name = %s",
                (store.schema, table),
            )
        }
        indexes = {
            row[0]
            for row in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = %s"
                " AND indexname NOT LIKE '%%_pkey' AND indexname NOT LIKE '%%_key'",
                (store.schema, table),
            )
        }
    return columns, indexes


@pytest.mark.parametrize("table", sorted(DECLARED))
def test_migrating_gives_the_declared_api_tables(store: Any, table: str) -> None:
    columns, indexes = _columns_and_indexes(store, table)
    assert columns == DECLARED[table]
    assert indexes == DECLARED_INDEXES[table]


@pytest.mark.parametrize(
    "statement",
    [
        # neither in flight nor completed
        "INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, created_at)"
        " VALUES ('t', 'k1', 'f', 'POST', '/', {now})",
        # both in flight and completed
        "INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, created_at,"
        " locked_at, status, content_type, body) VALUES ('t', 'k2', 'f', 'POST', '/', {now},"
        " {now}, 201, 'application/json', {body})",
        # completed without a body
        "INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, created_at,"
        " status) VALUES ('t', 'k3', 'f', 'POST', '/', {now}, 201)",
        # revoked before it was created
        "INSERT INTO api_tokens (id, tenant, token_hash, prefix, created_at, revoked_at)"
        " VALUES ('i', 't', 'h', 'p', {now}, {before})",
    ],
)
def test_the_api_tables_refuse_impossible_rows(store: Any, statement: str) -> None:
    from recoup.api.tokens import new_signing_secret
    from recoup.jobs.model import Tenant
    from recoup.timekeeping.clock import SystemClock

    now = SystemClock().now()
    store.ensure_tenant(
        Tenant(id="t", name="t", signing_secret=new_signing_secret(), created_at=now)
    )
    sqlite = isinstance(store, SqliteStore)
    values = {
        "now": "1000" if sqlite else "now()",
        "before": "999" if sqlite else "now() - interval '1 second'",
        "body": "x'7b7d'" if sqlite else "'\\x7b7d'::bytea",
    }
    with pytest.raises(Exception, match=r"(?i)check|constraint"):
        _execute(store, statement.format(**values))
