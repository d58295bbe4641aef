"""The PostgreSQL schema: creating it, applying the numbered migrations (each one transaction
under an advisory lock, so stores starting at once apply each once) and reading the version in
force."""

from __future__ import annotations

from psycopg import sql

from recoup.storage.postgres.dialect import QUERIES, PostgresDialect
from recoup.storage.sql_files import Migration, load_migrations

Q = QUERIES
# Taken while migrating, so that stores starting at once apply each migration once.
_MIGRATION_LOCK_KEY = 0x7265636F7570  # "recoup"


class PostgresMigrator:
    """`migrate` and `schema_version` in a `PostgresDialect`'s schema."""

    def __init__(self, dialect: PostgresDialect) -> None:
        self._dialect = dialect

    def migrate(self) -> int:
        with self._dialect.connection() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    sql.Identifier(self._dialect.schema)
                )
            )
            conn.execute(Q["create_schema_version"])
            # Read in one statement: a store opening on a schema at the latest version needs
            # no transaction per migration.
            applied = {row[0] for row in conn.execute(Q["applied_migrations"]).fetchall()}
        migrations = load_migrations(self._dialect.migrations_package)
        for migration in [m for m in migrations if m.version not in applied]:
            self._apply(migration)  # which looks again under the lock
        return self.schema_version()

    def schema_version(self) -> int:
        """The version in force; 0 for a schema never migrated."""
        with self._dialect.connection() as conn:
            exists = conn.execute(
                Q["has_schema_version"], {"schema": self._dialect.schema}
            ).fetchone()
            if exists is None or not exists[0]:
                return 0
            row = conn.execute(Q["schema_version"]).fetchone()
        assert row is not None
        return int(row[0])

    def _apply(self, migration: Migration) -> None:
        with self._dialect.connection() as conn:
            # The lock serialises migrators (per database); the version is re-read under it.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
            row = conn.execute(Q["has_migration"], {"version": migration.version}).fetchone()
            assert row is not None
            if row[0]:
                return
            conn.execute(migration.sql)
            conn.execute(
                Q["record_migration"], {"version": migration.version, "name": migration.name}
            )
