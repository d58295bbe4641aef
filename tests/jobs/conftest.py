"""The `store` fixture: every contract test runs once per backend.

SQLite gets a file in the test's temporary directory; PostgreSQL gets a fresh schema with a
random name (dropped afterwards), because several engineers and CI share one database.
`backend.open()` opens another store on the same database, for tests that need several
processes' worth of connections.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import pytest

from recoup.storage.sqlite.store import SqliteStore

if TYPE_CHECKING:
    from recoup.storage.postgres.store import PostgresStore

Store = Union[SqliteStore, "PostgresStore"]


@dataclass
class Backend:
    name: str
    _factory: Callable[[], Store]
    opened: list[Store] = field(default_factory=list)

    def open(self) -> Store:
        store = self._factory()
        self.opened.append(store)
        return store


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        path = str(tmp_path / "recoup.db")
        found = Backend("sqlite", lambda: SqliteStore(path, synchronous="NORMAL"))
        yield found
        for store in found.opened:
            store.close()
        return
    from recoup.storage.postgres.store import PostgresStore

    url: str = request.getfixturevalue("postgres_url")
    schema = f"test_{uuid.uuid4().hex[:12]}"
    options: dict[str, Any] = {"schema": schema, "min_size": 1, "max_size": 8}
    found = Backend("postgres", lambda: PostgresStore(url, **options))
    try:
        yield found
    finally:
        for store in found.opened:
            store.close()
        _drop_schema(url, schema)


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()
