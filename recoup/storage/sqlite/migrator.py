"""The SQLite schema: applying the numbered migrations (each one `BEGIN IMMEDIATE`
transaction, so two processes starting at once apply each once) and reading the version in
force."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator

from recoup.errors import StorageError
from recoup.storage.sql_files import Migration, load_migrations
from recoup.storage.sqlite.dialect import QUERIES, SqliteDialect

Q = QUERIES


class SqliteMigrator:
    """`migrate` and `schema_version` on a `SqliteDialect`'s database."""

    def __init__(self, dialect: SqliteDialect) -> None:
        self._dialect = dialect

    def migrate(self) -> int:
        with self._dialect.connection() as conn:
            conn.execute(Q["create_schema_version"])
            # Read in one statement: a store opening on a database at the latest version
            # needs no transaction per migration.
            applied = {row[0] for row in conn.execute(Q["applied_migrations"]).fetchall()}
            migrations = load_migrations(self._dialect.migrations_package)
            pending = [m for m in migrations if m.version not in applied]
            if pending:
                # Off while migrating (it cannot change inside a transaction): a migration that
                # makes a table again to change its CHECKs drops the table its children refer
                # to. Each migration checks every reference before it commits (`_apply`).
                conn.execute("PRAGMA foreign_keys = OFF")
                try:
                    for migration in pending:
                        self._apply(conn, migration)  # which looks again, locked
                finally:
                    conn.execute("PRAGMA foreign_keys = ON")
            version: int = conn.execute(Q["schema_version"]).fetchone()[0]
            return version

    def schema_version(self) -> int:
        """The version in force; 0 for a database never migrated."""
        with self._dialect.connection() as conn:
            if not conn.execute(Q["has_schema_version"]).fetchone()[0]:
                return 0
            version: int = conn.execute(Q["schema_version"]).fetchone()[0]
            return version

    @staticmethod
    def _apply(conn: sqlite3.Connection, migration: Migration) -> None:
        # Each migration is one transaction; re-reading the version under the write lock makes
        # two processes starting at once apply it once.
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute(Q["has_migration"], {"version": migration.version}).fetchone()[0]:
                conn.execute("ROLLBACK")
                return
            for statement in _statements(migration.sql):
                conn.execute(statement)
            broken = conn.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise StorageError(
                    f"migration {migration.version} ({migration.name}) would break"
                    f" {len(broken)} references, first {tuple(broken[0])}: nothing changed"
                )
            conn.execute(
                Q["record_migration"],
                {"version": migration.version, "name": migration.name, "now": _now_us()},
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _now_us() -> int:
    # Only for the bookkeeping column schema_version.applied_at.
    return time.time_ns() // 1000


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (`executescript` would commit our transaction)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer
            buffer = ""
    rest = "\n".join(
        line for line in buffer.splitlines() if line.strip() and not line.strip().startswith("--")
    )
    if rest.strip():
        raise ValueError(f"migration ends with an incomplete statement: {rest[:80]!r}")
