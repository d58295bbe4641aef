"""Fixtures for the scheduler's tests (the worker, schedules, targets): a database per test
on each backend, already migrated (tests/storage/databases.py; its URL too, for tests that
start `recoup worker` processes), a migrated store whose default tenant signs with a known
secret, a real HTTP receiver; and the per-backend `backend` and `store` fixtures, from their
home in tests/storage/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from recoup.jobs.model import DEFAULT_TENANT, Tenant
from tests.jobs.support import SECRET, Database, Receiver
from tests.storage.conftest import Backend, Store, backend, store
from tests.storage.databases import MigratedSchemas, copy_sqlite_template


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        from recoup.storage.sqlite.store import SqliteStore

        path = str(tmp_path / "recoup.db")
        copy_sqlite_template(request.getfixturevalue("sqlite_template"), Path(path))
        db = Database("sqlite", f"sqlite:///{path}", None, lambda: SqliteStore(path))
        try:
            yield db
        finally:
            for store in db.opened:
                store.close()
        return
    url: str = request.getfixturevalue("postgres_url")
    from recoup.storage.postgres.store import PostgresStore

    pool: MigratedSchemas = request.getfixturevalue("postgres_schemas")
    schema = pool.take()
    db = Database("postgres", url, schema, lambda: PostgresStore(url, schema=schema))
    try:
        yield db
    finally:
        for store in db.opened:
            store.close()
        pool.give_back(schema)


@pytest.fixture
def jobstore(database: Database) -> Any:
    """A migrated store (JobStore and ScheduleStore) whose default tenant signs with SECRET."""
    store = database.open()
    store.ensure_tenant(
        Tenant(
            id=DEFAULT_TENANT,
            name="Default",
            signing_secret=SECRET,
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
    )
    return store


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


__all__ = ["Backend", "Store", "backend", "store"]
