"""Storage at its edges: an unreachable database fails fast with one line, a value PostgreSQL
cannot store is the caller's invalid input (not an outage), and CLI errors name the option."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from recoup.cli import main
from recoup.errors import InvalidInput, StorageError
from recoup.jobs.model import NewJob, PythonTarget
from recoup.storage import redact_url
from recoup.storage.postgres.store import PROBE_TIMEOUT, PostgresStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def closed_port() -> int:
    # A port nothing listens on: bound, then released.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_database_fails_fast_naming_the_url_without_its_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"postgresql://app:s3cret@127.0.0.1:{closed_port()}/recoup"
    started = time.monotonic()
    with pytest.raises(StorageError) as caught:
        PostgresStore(url)
    assert time.monotonic() - started < PROBE_TIMEOUT + 1
    message = str(caught.value)
    assert "postgresql://app:***@127.0.0.1" in message
    assert "s3cret" not in message
    assert "\n" not in message
    assert not [r for r in caplog.records if r.name.startswith("psycopg.pool")]


@pytest.mark.parametrize("command", ["migrate", "worker", "serve"])
def test_the_cli_reports_an_unreachable_database_in_one_line(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    url = f"postgresql://app:s3cret@127.0.0.1:{closed_port()}/recoup"
    assert main([command, "--db", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot connect to PostgreSQL at postgresql://app:***@")
    assert err.count("\n") == 1


def test_redact_url_hides_only_the_password() -> None:
    assert redact_url("postgresql://u:p@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[PostgresStore]:
    import psycopg

    schema = f"test_edges_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(postgres_url, schema=schema)
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.postgres
def test_a_nul_byte_is_invalid_input_not_a_storage_outage(pg_store: PostgresStore) -> None:
    job = NewJob(run_at=NOW, target=PythonTarget(handler="h"), name="a\x00b")
    with pytest.raises(InvalidInput) as caught:
        pg_store.insert(job, now=NOW)
    assert not isinstance(caught.value, StorageError)
    assert caught.value.http_status == 422
    assert sum(pg_store.count_by_state().values()) == 0  # rolled back: nothing stored


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["worker", "--db", "sqlite:///x.db", "--allow-cidr", "not-a-cidr"], "--allow-cidr"),
        (["tenants", "list", "--db", "sqlite:///x.db", "--schema", "s"], "--schema"),
        (["migrate", "--db", "postgresql://u@127.0.0.1:1/x", "--schema", "Bad-Name"], "--schema"),
        (["worker", "--db", "postgresql://u@127.0.0.1:1/x", "--schema", "Bad-Name"], "--schema"),
    ],
)
def test_cli_errors_name_the_option_typed(
    capsys: pytest.CaptureFixture[str],
    tmp_path: object,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    option: str,
) -> None:
    monkeypatch.chdir(str(tmp_path))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {option}: ")
    assert err.count("\n") == 1


def test_every_module_of_the_package_says_what_it_is() -> None:
    # `recoup/__main__.py` and the migrations packages had none.
    import ast
    from pathlib import Path

    import recoup

    root = Path(recoup.__file__).parent
    missing = [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*.py"))
        if ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) is None
    ]
    assert missing == []
