"""Where the suite's databases come from, made so that tests do not wait on one another.

SQLite: each test process migrates one file once and every test gets a copy of it (migrating
costs ~70 ms a file, copying well under one).
PostgreSQL: each test process gets a database of its own on the test server (`ProcessDatabase`,
kept for the next run rather than dropped), and each test a schema in it as before. The
migrator's advisory lock is per database, so with one shared database every test process's
migrations queued behind one another's (a migration is ~0.2 s alone, over a second in the
suite); with one database a process they run side by side.
Cloning a migrated template database per test was tried and is slower on PostgreSQL 15
(`CREATE DATABASE` WAL-logs the template's ~9 MB: ~0.5 s, against ~0.2 s to migrate a schema).
The test server may run without autovacuum (the CI machine's does): a process's database has
its catalogs vacuumed when claimed and every `VACUUM_EVERY` schemas handed back, or each test's
schema check slows as the dead rows of every run before it pile up (35 ms against 7 ms, seen
here).
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit


def database_url(url: str, database: str) -> str:
    """`url` naming `database` instead of its own."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{database}"))


def make_sqlite_template(directory: Path) -> Path:
    """A migrated SQLite file in `directory`, to copy (its store closed, so no WAL is left)."""
    from recoup.storage.sqlite.store import SqliteStore

    path = directory / "template.db"
    SqliteStore(str(path), synchronous="NORMAL").close()
    leftovers = [p.name for p in directory.iterdir() if p.name != path.name]
    assert not leftovers, f"the template's store left {leftovers}: a copy would miss them"
    return path


def copy_sqlite_template(template: Path, path: Path) -> None:
    shutil.copyfile(template, path)


# The catalogs that making, emptying and dropping schemas fill with dead rows (see above).
_CATALOGS = (
    "pg_class, pg_attribute, pg_attrdef, pg_constraint, pg_depend, pg_index, pg_proc,"
    " pg_sequence, pg_trigger, pg_type"
)
VACUUM_EVERY = 100  # schemas handed back between two vacuums of a process's catalogs

# The advisory-lock class of the suite's database claims (key: the database's number).
_CLAIM_LOCK = 0x52434F50  # "RCOP"
# Where a reused database's leftovers live: every schema but PostgreSQL's own.
_LEFTOVER_SCHEMAS = """
SELECT nspname FROM pg_namespace
WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\\_%'
ORDER BY nspname
"""


class ProcessDatabase:
    """A database of this test process's own on the test server, reused by later runs.

    Dropping a database makes PostgreSQL checkpoint at once (3 to 12 s on this machine at the
    end of every test process), so the databases `recoup_test_0`, `recoup_test_1`, … stay on
    the server: a process claims the first whose advisory lock no other process holds (the
    lock lives as long as the claim's connection), and empties it of what an earlier run left
    (every schema dropped, `public` made anew) before its tests use it."""

    def __init__(self, server_url: str, *, first: int = 0) -> None:
        """Claim the first free database numbered `first` or above."""
        import psycopg

        self.server_url = server_url
        self._conn = psycopg.connect(server_url, autocommit=True)
        for number in itertools.count(first):
            row = self._conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (_CLAIM_LOCK, number)
            ).fetchone()
            if row and row[0]:
                break
        self.name = f"recoup_test_{number}"
        exists = self._conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (self.name,)
        ).fetchone()
        if exists and not self._emptied():
            # A process an earlier run left behind still holds locks in it: start afresh.
            self._conn.execute(f'DROP DATABASE "{self.name}" WITH (FORCE)')
            exists = None
        if not exists:
            self._conn.execute(f'CREATE DATABASE "{self.name}"')
        else:  # an earlier run's dead rows, gone in a fraction of a second
            vacuum_catalogs(self.url, full=True)

    @property
    def url(self) -> str:
        return database_url(self.server_url, self.name)

    def _emptied(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url) as conn:
                conn.execute("SET lock_timeout = '5s'")
                schemas = [r[0] for r in conn.execute(_LEFTOVER_SCHEMAS).fetchall()]
                for schema in schemas:
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
                conn.execute("CREATE SCHEMA public")
        except psycopg.Error:
            return False
        return True

    def release(self) -> None:
        """Give the database up for a later run (closing the claim's connection frees it)."""
        self._conn.close()


# The schema's shape, for telling whether a test changed it (then it is dropped, not reused).
_SHAPE = """
SELECT md5(coalesce(string_agg(item, ',' ORDER BY item), '')) FROM (
  SELECT concat_ws(':', c.relname, c.relkind, a.attname, a.atttypid, a.attnotnull) AS item
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  WHERE n.nspname = %(schema)s
  UNION ALL
  SELECT concat_ws(':', con.conname, pg_get_constraintdef(con.oid)) FROM pg_constraint con
  JOIN pg_namespace n ON n.oid = con.connamespace WHERE n.nspname = %(schema)s
  UNION ALL
  SELECT concat_ws(':', t.tgname, c.relname) FROM pg_trigger t
  JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = %(schema)s
  UNION ALL
  SELECT concat_ws(':', p.proname, md5(p.prosrc)) FROM pg_proc p
  JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(schema)s
) shape
"""
_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind IN ('r', 'p') ORDER BY c.relname
"""
_USED_SEQUENCES = (
    "SELECT sequencename FROM pg_sequences WHERE schemaname = %s AND last_value IS NOT NULL"
)


def vacuum_catalogs(url: str, *, full: bool = False) -> None:
    """Vacuum the database's schema catalogs (`full`: rewritten, as small as what is live)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '2s'")  # a lock left by a test: vacuum another time
        with contextlib.suppress(psycopg.errors.LockNotAvailable):
            conn.execute(f"VACUUM {'FULL ' if full else ''}{_CATALOGS}")


class MigratedSchemas:
    """Migrated PostgreSQL schemas in one database, handed back emptied for the next test.

    Migrating a schema is ~0.2 s of the server's CPU, and the suite makes one for most of its
    ~2,500 PostgreSQL tests; emptying one is a few statements. A schema goes back to the pool
    only as migrating would leave it: same tables, columns, constraints, triggers and
    functions (else it is dropped), every table empty but those the migrations fill, which
    hold again exactly their rows after migrating, and its sequences restarted."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._idle: list[str] = []
        self._shape: str | None = None
        self._seeded: dict[str, list[str]] = {}  # table → its rows after migrating, as text
        self._conn: Any = None
        self._handed_back = 0

    def take(self) -> str:
        if self._idle:
            return self._idle.pop()
        from recoup.storage.postgres.store import PostgresStore

        schema = f"test_{uuid.uuid4().hex[:12]}"
        PostgresStore(self.url, schema=schema, min_size=1, max_size=1).close()
        if self._shape is None:
            self._shape, self._seeded = self._describe(schema)
        return schema

    def give_back(self, schema: str) -> None:
        """Empty `schema` for the next test, or drop it when it is not as migrated."""
        try:
            reusable = self._reset(schema)
        except Exception:
            reusable = False
        if reusable:
            self._idle.append(schema)
        else:
            self.drop(schema)
        self._handed_back += 1
        if self._handed_back % VACUUM_EVERY == 0:
            # Each emptying TRUNCATEs, which gives every table and index a new pg_class row.
            vacuum_catalogs(self.url)

    def close(self) -> None:
        """Close the connection the pool empties schemas on (the schemas stay)."""
        if self._conn is not None:
            self._conn.close()

    def __enter__(self) -> MigratedSchemas:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def drop(self, schema: str) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def _describe(self, schema: str) -> tuple[str, dict[str, list[str]]]:
        import psycopg

        with psycopg.connect(self.url) as conn:
            row = conn.execute(_SHAPE, {"schema": schema}).fetchone()
            assert row is not None
            seeded = {}
            for (table,) in conn.execute(_TABLES, (schema,)).fetchall():
                rows = self._rows(conn, schema, table)
                if rows:
                    seeded[table] = rows
        return str(row[0]), seeded

    @staticmethod
    def _rows(conn: Any, schema: str, table: str) -> list[str]:
        found = conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t ORDER BY 1')
        return [r[0] for r in found.fetchall()]

    def _connection(self) -> Any:
        """The pool's own connection, kept between tests: a new one per test cost a server
        process and its cold catalog caches (~10 ms of the server's CPU each time)."""
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url)
            # A connection a test left behind holding a lock is a schema not to reuse.
            self._conn.execute("SET lock_timeout = '5s'")
            self._conn.commit()
        return self._conn

    def _reset(self, schema: str) -> bool:
        conn = self._connection()
        try:
            reusable = self._empty(conn, schema)
        except BaseException:
            conn.close()  # in an unknown state: the next reset connects afresh
            raise
        if reusable:
            conn.commit()
        else:
            conn.rollback()
        return reusable

    def _empty(self, conn: Any, schema: str) -> bool:
        """Empty `schema` on `conn`, uncommitted; False where it is not as migrated."""
        row = conn.execute(_SHAPE, {"schema": schema}).fetchone()
        if row is None or row[0] != self._shape:
            return False
        tables = [r[0] for r in conn.execute(_TABLES, (schema,)).fetchall()]
        if not tables:
            return False
        probe = " UNION ALL ".join(
            f'(SELECT {i} FROM "{schema}"."{t}" LIMIT 1)' for i, t in enumerate(tables)
        )
        filled = {tables[r[0]] for r in conn.execute(probe).fetchall()}
        dirty = [t for t in sorted(filled) if t not in self._seeded]
        if dirty:
            names = ", ".join(f'"{schema}"."{t}"' for t in dirty)
            conn.execute(f"TRUNCATE {names} CASCADE")
        for table, rows in self._seeded.items():
            if self._rows(conn, schema, table) != rows:
                conn.execute(f'DELETE FROM "{schema}"."{table}"')
                conn.execute(
                    f'INSERT INTO "{schema}"."{table}"'
                    f' SELECT (r::"{schema}"."{table}").* FROM unnest(%s::text[]) r',
                    (rows,),
                )
        for (sequence,) in conn.execute(_USED_SEQUENCES, (schema,)).fetchall():
            conn.execute(f'ALTER SEQUENCE "{schema}"."{sequence}" RESTART')
        # TRUNCATE ... CASCADE may have emptied a seeded table through a foreign key.
        for table, rows in self._seeded.items():
            if self._rows(conn, schema, table) != rows:
                return False
        return True
