"""The suite's database sources hand each test what migrating a fresh database would: a
reused PostgreSQL schema is emptied back to its migrated rows, and one a test reshaped is
dropped rather than reused; a test process's reused database is claimed by one process at a
time and emptied of an earlier run's schemas; a copied SQLite file is at the latest version."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from recoup.storage.postgres.store import PostgresStore
from recoup.storage.sqlite.store import SqliteStore
from tests.storage.databases import MigratedSchemas, ProcessDatabase, copy_sqlite_template
from tests.storage.test_dunning_store import TENANT, event, invoice


def _rows(url: str, schema: str, table: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        found = conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t ORDER BY 1')
        return [r[0] for r in found.fetchall()]


@pytest.fixture
def pool(postgres_url: str) -> Iterator[MigratedSchemas]:
    """A pool of the test's own (the suite's is shared by every test of the process)."""
    with MigratedSchemas(postgres_url) as schemas:
        yield schemas


@pytest.mark.postgres
def test_a_schema_given_back_is_empty_again_and_its_seeded_rows_as_migrated(
    postgres_url: str, pool: MigratedSchemas
) -> None:
    schema = pool.take()
    fresh_versions = _rows(postgres_url, schema, "schema_version")
    store = PostgresStore(postgres_url, schema=schema)
    store.create_invoice(invoice(), [event("inv_1", 1)])
    first_event = _rows(postgres_url, schema, "invoice_events")
    epoch_before = _rows(postgres_url, schema, "auth_epoch")
    store.close()
    import psycopg

    # A seeded row changed, which emptying must put back as migrating left it.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'UPDATE "{schema}".auth_epoch SET epoch = epoch + 7')
    pool.give_back(schema)
    assert pool.take() == schema  # reused, not dropped
    assert _rows(postgres_url, schema, "invoices") == []
    assert _rows(postgres_url, schema, "auth_epoch") == epoch_before
    assert _rows(postgres_url, schema, "schema_version") == fresh_versions
    again = PostgresStore(postgres_url, schema=schema)
    try:
        again.create_invoice(invoice(), [event("inv_1", 1)])
        assert again.get_invoice(TENANT, "inv_1") is not None
        # The same rows as the first time: nothing of the previous use is left to collide.
        assert _rows(postgres_url, schema, "invoice_events") == first_event
    finally:
        again.close()
        pool.drop(schema)


@pytest.mark.postgres
def test_a_schema_a_test_reshaped_is_dropped_not_reused(
    postgres_url: str, pool: MigratedSchemas
) -> None:
    import psycopg

    schema = pool.take()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}".invoices ADD COLUMN planted integer')
    pool.give_back(schema)
    with psycopg.connect(postgres_url) as conn:
        gone = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)
        ).fetchone()
    assert gone == (0,)
    other = pool.take()
    try:
        assert other != schema
    finally:
        pool.drop(other)


@pytest.mark.postgres
def test_a_process_database_is_claimed_once_and_emptied_for_the_next_run(
    postgres_server_url: str,
) -> None:
    import psycopg

    # Numbers far above the suite's own processes' claims, which hold 0, 1, ….
    first = ProcessDatabase(postgres_server_url, first=1000)
    second = ProcessDatabase(postgres_server_url, first=1000)
    try:
        assert (first.name, second.name) == ("recoup_test_1000", "recoup_test_1001")
        with psycopg.connect(first.url, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA leftover")
            conn.execute("CREATE TABLE leftover.t (x int)")
            conn.execute("CREATE TABLE public.stray (x int)")
        first.release()
        again = ProcessDatabase(postgres_server_url, first=1000)
        try:
            assert again.name == first.name
            with psycopg.connect(again.url) as conn:
                schemas = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace")}
                tables = conn.execute(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                ).fetchone()
            assert "leftover" not in schemas and "public" in schemas
            assert tables == (0,)
        finally:
            again.release()
    finally:
        second.release()


def test_a_copied_sqlite_file_is_at_the_latest_version(
    sqlite_template: Path, tmp_path: Path
) -> None:
    path = tmp_path / "copy.db"
    copy_sqlite_template(sqlite_template, path)
    store = SqliteStore(str(path), migrate=False)
    try:
        assert store.schema_version() == max(m.version for m in store.migrations())
    finally:
        store.close()
