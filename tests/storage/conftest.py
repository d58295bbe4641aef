"""The one backend fixture: every test that takes `backend` or `store` runs once per backend
(or on one alone, `only_on`, for what only that backend has).

SQLite gets a file in the test's temporary directory, a copy of one migrated once per test
process (tests/storage/databases.py), so that opening a store finds nothing to apply;
PostgreSQL a schema of its own in the test process's own database, migrated once and emptied
after each test for the next (`MigratedSchemas`: dropped instead when a test changed its
shape). `empty_backend` gives one never migrated, for the tests of migrating.
`backend.open()` opens another store on the same database, for tests that need several
processes' worth of connections.

What a test needs to reach past the `Store` protocol (raw SQL for constraint tests, the
database's own description of its schema, a query plan, the CLI's `--db` options) is a
capability of `Backend`, written once per backend here, so that the tests themselves never
branch on the backend. tests/jobs, tests/recovery and tests/api import these fixtures.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from recoup.storage import Store
from tests.storage.databases import MigratedSchemas, copy_sqlite_template

Tables = dict[str, set[str]]  # table → column (or index) names


@dataclass
class Backend:
    """A fresh database of one backend, and what tests may ask of it beyond `Store`."""

    name: str  # for test ids and messages: tests do not branch on it
    url: str  # what `--db` takes
    schema: str | None  # PostgreSQL's schema (what `--schema` takes); None on SQLite
    _factory: Callable[[], Store]
    queries: Mapping[str, str]  # the backend's named queries (for `plan`)
    # Tables only this backend has (SQLite: the counter standing in for LISTEN/NOTIFY).
    own_tables: Tables = field(default_factory=dict)
    # SQL literals for constraint tests: an instant, an earlier one, and the bytes b"{}".
    now_sql: str = ""
    earlier_sql: str = ""
    bytes_sql: str = ""
    opened: list[Store] = field(default_factory=list)

    def open(self) -> Store:
        store = self._factory()
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in self.opened:
            store.close()

    def db_args(self) -> list[str]:
        """The CLI options naming this database."""
        return ["--db", self.url] + ([] if self.schema is None else ["--schema", self.schema])

    # Capabilities past the protocol, per backend

    def execute(self, statement: str) -> None:
        """Run one statement on a connection of its own, committed."""
        raise NotImplementedError

    def describe(self) -> tuple[Tables, Tables]:
        """(columns by table, indexes by table) as the database reports them; indexes that
        only back a primary key or a UNIQUE constraint are left out."""
        raise NotImplementedError

    def plan(self, query: str) -> str:
        """The query plan of one of the backend's named queries, sequential scans
        discouraged."""
        raise NotImplementedError

    def dump(self) -> str:
        """Every row of every table as text: what a dump or a backup of the database holds."""
        raise NotImplementedError


class SqliteBackend(Backend):
    @property
    def path(self) -> str:
        return self.url.removeprefix("sqlite:///")

    def execute(self, statement: str) -> None:
        conn = sqlite3.connect(self.path)
        try:
            conn.execute(statement)
            conn.commit()
        finally:
            conn.close()

    def describe(self) -> tuple[Tables, Tables]:
        columns: Tables = {}
        indexes: Tables = {}
        conn = sqlite3.connect(self.path)
        try:
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                    " AND name NOT LIKE 'sqlite_%'"
                )
            ]
            for table in tables:
                columns[table] = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                indexes[table] = {
                    row[1]
                    for row in conn.execute(f"PRAGMA index_list({table})")
                    if not row[1].startswith("sqlite_autoindex")
                }
        finally:
            conn.close()
        return columns, indexes

    def plan(self, query: str) -> str:
        sql = self.queries[query]
        conn = sqlite3.connect(self.path)
        try:
            return "\n".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        finally:
            conn.close()

    def dump(self) -> str:
        conn = sqlite3.connect(self.path)
        try:
            return "\n".join(conn.iterdump())
        finally:
            conn.close()


class PostgresBackend(Backend):
    def _connect(self, options: str = "") -> Any:
        import psycopg

        return psycopg.connect(self.url, options=f"-c search_path={self.schema} {options}")

    def execute(self, statement: str) -> None:
        with self._connect() as conn:
            conn.execute(statement.encode())

    def describe(self) -> tuple[Tables, Tables]:
        columns: Tables = {}
        indexes: Tables = {}
        with self._connect() as pg:
            for table, column in pg.execute(
                "SELECT table_name, column_name FROM information_schema.columns"
                " WHERE table_schema = %s",
                (self.schema,),
            ):
                columns.setdefault(table, set()).add(column)
            for table, index in pg.execute(
                "SELECT i.tablename, i.indexname FROM pg_indexes i WHERE i.schemaname = %s"
                " AND NOT EXISTS (SELECT 1 FROM pg_constraint c"
                "   WHERE c.conindid = format('%%I.%%I', i.schemaname, i.indexname)::regclass)",
                (self.schema,),
            ):
                indexes.setdefault(table, set()).add(index)
        return columns, indexes

    def plan(self, query: str) -> str:
        with self._connect("-c enable_seqscan=off") as pg:
            return "\n".join(row[0] for row in pg.execute("EXPLAIN " + self.queries[query]))

    def dump(self) -> str:
        lines = []
        with self._connect() as pg:
            tables = pg.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
                (self.schema,),
            ).fetchall()
            for (table,) in tables:
                rows = pg.execute(f'SELECT t::text FROM "{table}" t').fetchall()
                lines += [f"{table}: {row[0]}" for row in rows]
        return "\n".join(lines)


def _make_backend(
    request: pytest.FixtureRequest, tmp_path: Path, *, migrated: bool
) -> Iterator[Backend]:
    if request.param == "sqlite":
        from recoup.storage.sqlite.store import SqliteStore

        path = str(tmp_path / "recoup.db")
        if migrated:
            copy_sqlite_template(request.getfixturevalue("sqlite_template"), Path(path))
        found: Backend = SqliteBackend(
            "sqlite",
            f"sqlite:///{path}",
            None,
            lambda: SqliteStore(path, synchronous="NORMAL"),
            SqliteStore.queries,
            own_tables={"wakeups": {"id", "seq"}},
            now_sql="1000",
            earlier_sql="999",
            bytes_sql="x'7b7d'",
        )
        try:
            yield found
        finally:
            found.close()
        return
    from recoup.storage.postgres.store import PostgresStore

    url: str = request.getfixturevalue("postgres_url")
    pool: MigratedSchemas | None = None
    if migrated:
        pool = request.getfixturevalue("postgres_schemas")
        schema = pool.take()
    else:
        schema = f"test_{uuid.uuid4().hex[:12]}"
    found = PostgresBackend(
        "postgres",
        url,
        schema,
        lambda: PostgresStore(url, schema=schema, min_size=1, max_size=10),
        PostgresStore.queries,
        now_sql="now()",
        earlier_sql="now() - interval '1 second'",
        bytes_sql="'\\x7b7d'::bytea",
    )
    try:
        yield found
    finally:
        found.close()
        if pool is None:
            _drop_schema(url, schema)
        else:
            pool.give_back(schema)


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


_POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)
_BACKENDS = ["sqlite", _POSTGRES]


def only_on(name: str) -> pytest.MarkDecorator:
    """Parametrise a test's `backend` (and so `store`) with one backend alone, for what only
    that backend has (PostgreSQL's round trips, SQLite's statements): the test runs there
    and is not reported as skipped on the other."""
    param = {"sqlite": "sqlite", "postgres": _POSTGRES}[name]
    return pytest.mark.parametrize("backend", [param], indirect=True)


@pytest.fixture(params=_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A database of its own, already migrated (migrating again finds nothing to apply)."""
    yield from _make_backend(request, tmp_path, migrated=True)


@pytest.fixture(params=_BACKENDS)
def empty_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A database of its own never migrated, for tests that migrate it themselves."""
    yield from _make_backend(request, tmp_path, migrated=False)


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()


__all__ = ["Backend", "Store", "backend", "empty_backend", "only_on", "store"]
