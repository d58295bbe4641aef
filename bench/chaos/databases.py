"""A fresh database for one chaos run, dropped afterwards: an SQLite file, or a PostgreSQL
database of its own (not a schema), so that terminating every connection to it
(`pg_terminate_backend` by `datname`) reaches Recoup's processes and nobody else's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

HARNESS_APP_NAME = "recoup-chaos-harness"  # the harness's own connections are spared


@dataclass(frozen=True, kw_only=True)
class Database:
    backend: str  # sqlite | postgres
    url: str  # what Recoup's processes get as --db
    harness_url: str  # the harness's own store: on PostgreSQL, named so it is spared
    admin_url: str | None = None  # PostgreSQL: a connection to another database, to kill from
    name: str | None = None  # PostgreSQL: the database's name


@contextmanager
def fresh_database(
    backend: str, directory: Path, postgres_url: str, *, keep: bool = False
) -> Iterator[Database]:
    """A new empty database of `backend` (SQLite: a file in `directory`; PostgreSQL: created
    on the server of `postgres_url`, dropped with FORCE afterwards unless `keep`, for a look
    at what a failed run left)."""
    if backend == "sqlite":
        url = f"sqlite:///{directory / 'recoup.db'}"
        yield Database(backend=backend, url=url, harness_url=url)
        return
    if backend != "postgres":
        raise ValueError(f"backend: expected sqlite or postgres, got {backend!r}")
    import psycopg

    name = f"recoup_chaos_{uuid.uuid4().hex[:10]}"
    parts = urlsplit(postgres_url)
    url = urlunsplit(parts._replace(path=f"/{name}", query=""))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield Database(
            backend=backend,
            url=url,
            harness_url=f"{url}?application_name={HARNESS_APP_NAME}",
            admin_url=postgres_url,
            name=name,
        )
    finally:
        if not keep:
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


__all__ = ["HARNESS_APP_NAME", "Database", "fresh_database"]
