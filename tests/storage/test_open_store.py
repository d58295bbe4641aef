"""Opening stores from URLs, the SQL file loaders, and `recoup migrate`."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recoup.cli import main
from recoup.errors import InvalidInput
from recoup.jobs.model import NewJob, PythonTarget
from recoup.storage import DEFAULT_DB_URL, open_store, redact_url, sqlite_path
from recoup.storage.sql_files import load_migrations, load_queries, parse_queries
from recoup.storage.sqlite.store import SqliteStore


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///recoup.db", "recoup.db"),  # relative to the working directory
        ("sqlite:///data/jobs.sqlite", "data/jobs.sqlite"),
        ("sqlite:////var/lib/recoup.db", "/var/lib/recoup.db"),  # absolute
        ("sqlite://:memory:", ":memory:"),
        ("sqlite:///:memory:", ":memory:"),
        ("jobs.db", "jobs.db"),  # a bare path
        ("./x/jobs.sqlite3", "./x/jobs.sqlite3"),
        ("postgresql://u@h/db", None),
        ("sqlite://host/x.db", None),  # a host means nothing to SQLite
        ("jobs.txt", None),
    ],
)
def test_sqlite_urls_name_their_file(url: str, path: str | None) -> None:
    assert sqlite_path(url) == path


def test_the_default_url_is_a_file_in_the_working_directory() -> None:
    assert sqlite_path(DEFAULT_DB_URL) == "recoup.db"


@pytest.mark.parametrize("url", ["mysql://u@h/db", "redis://x", "", "recoup"])
def test_an_unknown_url_is_invalid_input_naming_the_option(url: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        open_store(url)
    assert caught.value.field == "--db"


def test_open_store_opens_and_migrates_sqlite(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        assert isinstance(store, SqliteStore)
        assert store.schema_version() >= 1
    finally:
        store.close()
    raw = open_store(str(tmp_path / "b.db"), migrate=False)
    try:
        assert raw.schema_version() == 0
    finally:
        raw.close()


def test_a_memory_store_is_one_database_for_every_thread() -> None:
    store = open_store("sqlite://:memory:")
    now = datetime(2026, 1, 1, tzinfo=UTC)
    inserted = store.insert(NewJob(run_at=now, target=PythonTarget(handler="h")), now=now)
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(store.get("default", inserted.id)))
    thread.start()
    thread.join()
    assert seen == [inserted]
    store.close()


def test_query_files_split_into_named_blocks_with_columns_expanded() -> None:
    queries = parse_queries("-- a --\nSELECT 1\n\n-- b_2 --\nSELECT {job_columns} FROM jobs\n")
    assert queries["a"] == "SELECT 1"
    assert queries["b_2"].startswith("SELECT id, tenant, name, run_at")
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- a --\nSELECT 1\n-- a --\nSELECT 2\n")


def test_fragments_expand_into_later_blocks_and_are_not_queries() -> None:
    queries = parse_queries(
        "-- _set --\nSET x = 1\n\n-- a --\nUPDATE t {_set}\n"
        "-- b --\nINSERT INTO t ({insert_columns})\n"
    )
    assert set(queries) == {"a", "b"}
    assert queries["a"] == "UPDATE t SET x = 1"
    assert queries["b"].startswith("INSERT INTO t (id, tenant, name, run_at,")
    assert "occurrence_at, metadata," in queries["b"]
    assert "created_at, updated_at)" in queries["b"]
    for unknown in ("{_nope}", "{jbo_columns}"):
        with pytest.raises(ValueError, match="unknown placeholder"):
            parse_queries(f"-- a --\nSELECT {unknown}\n")
    # A fragment must come before the blocks that use it.
    with pytest.raises(ValueError, match="unknown placeholder"):
        parse_queries("-- a --\nUPDATE t {_set}\n-- _set --\nSET x = 1\n")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_every_cancelling_statement_shares_one_set_clause(backend: str) -> None:
    queries = load_queries(f"recoup.storage.{backend}")
    cancelling = ["cancel_job", "cancel_by_name", "cancel_by_prefix", "cancel_schedule_jobs"]
    # The SET clause of each, whitespace normalised: one text, from the `_cancel_set` fragment.
    clauses = {
        " ".join(queries[name].split("SET state", 1)[1].split("WHERE", 1)[0].split())
        for name in cancelling
    }
    assert len(clauses) == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_every_backend_ships_numbered_migrations_from_one(backend: str) -> None:
    # Numbers are handed out to branches in parallel, so a merge may leave a gap for a while:
    # each number once, in order, from one (the migrators apply every one not recorded).
    migrations = load_migrations(f"recoup.storage.{backend}.migrations")
    versions = [m.version for m in migrations]
    assert versions == sorted(set(versions)) and versions[0] == 1
    assert migrations[0].name == "0001_init.sql"


def test_both_backends_have_the_same_migrations() -> None:
    sqlite = [m.name for m in load_migrations("recoup.storage.sqlite.migrations")]
    postgres = [m.name for m in load_migrations("recoup.storage.postgres.migrations")]
    assert sqlite == postgres


def test_migrate_command_applies_then_finds_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["migrate", "--db", url, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["backend"] == "sqlite" and first["from_version"] == 0
    assert first["applied"][0] == "0001_init.sql"
    assert first["schema_version"] == int(first["applied"][-1][:4])  # numbers may skip
    assert main(["migrate", "--db", url, "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["applied"] == [] and second["schema_version"] == first["schema_version"]
    assert main(["migrate", "--db", url]) == 0
    assert "up to date" in capsys.readouterr().out


def test_migrate_command_refuses_an_unknown_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--db", "mysql://x/y"]) == 2
    assert "--db" in capsys.readouterr().err


@pytest.mark.postgres
def test_migrate_command_on_postgres_hides_the_password_and_creates_the_schema(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    schema = f"test_{uuid.uuid4().hex[:12]}"
    try:
        assert main(["migrate", "--db", postgres_url, "--schema", schema, "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["backend"] == "postgresql" and result["schema"] == schema
        assert result["from_version"] == 0 and result["schema_version"] >= 1
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_the_database_url_never_shows_a_password() -> None:
    # What `recoup migrate` prints (and the PostgreSQL store's connection errors).
    assert redact_url("postgresql://u:s3cret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_url("sqlite://:memory:") == "sqlite://:memory:"
