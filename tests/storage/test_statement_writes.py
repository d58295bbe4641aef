"""SQLite's `statement_write` (a write that is one statement): a transaction of its own
outside a unit of work, the unit's transaction without a savepoint inside one (as PostgreSQL's
autocommit connection joins a unit's transaction), since one statement fails whole on its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from recoup.errors import StorageError
from recoup.storage import open_store
from recoup.storage.sql_store import SqlStore

BUMP = "UPDATE wakeups SET seq = seq + 1 WHERE id = 1"
CLASH = "INSERT INTO wakeups (id, seq) VALUES (1, 0)"  # the one row's key: always refused
SEQ = "SELECT seq FROM wakeups WHERE id = 1"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    opened = open_store(f"sqlite:///{tmp_path / 'statements.db'}")
    assert isinstance(opened, SqlStore)
    try:
        yield opened
    finally:
        opened.close()


def seq(store: SqlStore) -> int:
    with store.dialect.read() as conn:
        return int(conn.execute(SEQ).fetchone()[0])


def test_inside_a_unit_a_one_statement_write_takes_no_savepoint_and_a_write_block_does(
    store: SqlStore,
) -> None:
    dialect = store.dialect
    seen: list[str] = []

    def unit() -> None:
        with dialect.connection() as conn:  # the unit's: it runs on this thread, alone
            conn.set_trace_callback(seen.append)
        with dialect.statement_write() as conn:
            conn.execute(BUMP)
        with dialect.write() as conn:
            conn.execute(BUMP)

    try:
        store.atomically(unit)
    finally:
        with dialect.connection() as conn:
            conn.set_trace_callback(None)
    words = [statement.split()[0].upper() for statement in seen]
    assert words == ["UPDATE", "SAVEPOINT", "UPDATE", "RELEASE", "COMMIT"]


def test_a_refused_statement_inside_a_unit_writes_nothing_and_the_unit_goes_on(
    store: SqlStore,
) -> None:
    dialect = store.dialect
    before = seq(store)

    def unit() -> str:
        with dialect.statement_write() as conn:
            conn.execute(BUMP)
        try:
            with dialect.statement_write() as conn:
                conn.execute(CLASH)
        except StorageError:
            pass  # SQLite undid the refused statement; the transaction goes on
        with dialect.statement_write() as conn:
            conn.execute(BUMP)
        return "done"

    assert store.atomically(unit) == "done"
    assert seq(store) == before + 2


def test_outside_a_unit_a_one_statement_write_is_a_transaction_of_its_own(
    store: SqlStore,
) -> None:
    dialect = store.dialect
    with dialect.connection() as conn:
        seen: list[str] = []
        conn.set_trace_callback(seen.append)
        try:
            with dialect.statement_write() as written:
                written.execute(BUMP)
        finally:
            conn.set_trace_callback(None)
    assert [s.split()[0].upper() for s in seen] == ["BEGIN", "UPDATE", "COMMIT"]
    with pytest.raises(StorageError), dialect.statement_write() as conn:
        conn.execute(CLASH)
    assert not dialect.closed
