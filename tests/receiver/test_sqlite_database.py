"""The receiver's SQLite database: one connection kept for every transaction (a connection per
transaction made each commit the last connection's close, which checkpoints the WAL), the
threads of one process queued on an in-process lock (not SQLite's sleeping busy handler), and
SQLite's `synchronous` setting."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from recoup.errors import InvalidInput, StorageError
from recoup.receiver import SqliteDatabase


def test_every_transaction_uses_the_one_connection_and_commits(tmp_path: Path) -> None:
    database = SqliteDatabase(tmp_path / "billing.db")
    database.ensure_schema()
    with database.transaction() as first:
        first.execute("CREATE TABLE notes (n INTEGER)")
    with database.transaction() as second:
        second.execute("INSERT INTO notes VALUES (1)")
    assert first is second
    # Committed: another connection sees the row, and the WAL was not folded back into the
    # database by a closing connection (it is still there, holding the commit).
    other = sqlite3.connect(tmp_path / "billing.db")
    assert other.execute("SELECT n FROM notes").fetchall() == [(1,)]
    other.close()
    assert (tmp_path / "billing.db-wal").exists()
    database.close()
    with database.transaction() as reopened:  # a closed database opens a new connection
        assert reopened is not first
        assert reopened.execute("SELECT count(*) FROM notes").fetchone() == (1,)
    database.close()


def test_a_failed_block_rolls_back_and_the_connection_goes_on(tmp_path: Path) -> None:
    database = SqliteDatabase(tmp_path / "billing.db")
    with database.transaction() as conn:
        conn.execute("CREATE TABLE notes (n INTEGER)")
    with pytest.raises(RuntimeError), database.transaction() as conn:
        conn.execute("INSERT INTO notes VALUES (1)")
        raise RuntimeError("the handler failed")
    with pytest.raises(StorageError), database.transaction() as conn:
        conn.execute("INSERT INTO no_such_table VALUES (1)")
    with database.transaction() as conn:
        assert not conn.execute("SELECT * FROM notes").fetchall()
    database.close()


def test_threads_share_the_connection_one_transaction_at_a_time(tmp_path: Path) -> None:
    # Read-modify-write from six threads through two objects on one file: a lost update or a
    # transaction interleaved with another on the shared connection would show in the count.
    database = SqliteDatabase(tmp_path / "billing.db")
    with database.transaction() as conn:
        conn.execute("CREATE TABLE counter (n INTEGER)")
        conn.execute("INSERT INTO counter VALUES (0)")
    again = SqliteDatabase(tmp_path / "billing.db")  # same file, same in-process lock
    errors: list[BaseException] = []

    def bump(db: SqliteDatabase) -> None:
        try:
            for _ in range(50):
                with db.transaction() as conn:
                    (n,) = conn.execute("SELECT n FROM counter").fetchone()
                    conn.execute("UPDATE counter SET n = ?", (n + 1,))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=bump, args=(db,)) for db in (database, again) * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with database.transaction() as conn:
        assert conn.execute("SELECT n FROM counter").fetchone() == (300,)
    database.close()
    again.close()


def test_synchronous_is_applied_and_checked(tmp_path: Path) -> None:
    database = SqliteDatabase(tmp_path / "billing.db", synchronous="normal")
    with database.transaction() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    database.close()
    with pytest.raises(InvalidInput, match="synchronous"):
        SqliteDatabase(tmp_path / "billing.db", synchronous="sometimes")
