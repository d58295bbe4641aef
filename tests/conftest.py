"""Shared fixtures: the PostgreSQL URL (skip where unreachable, fail under CI=true), and the
migrated databases the per-test databases are copied from (tests/storage/databases.py)."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx._transports.default as _transports
import pytest
from hypothesis import HealthCheck, settings

from tests.storage.databases import (
    MigratedSchemas,
    ProcessDatabase,
    make_sqlite_template,
)

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"

# The suite's processes (and the servers they start) seal provider secrets with one key, as a
# deployment on PostgreSQL must (`recoup.sealed`); the key file beside a SQLite database is
# tested on its own (tests/test_sealed.py).
os.environ.setdefault("RECOUP_SECRET_KEY", "Ab1Cu2Bv5tJ5yAcUc7dXhLpVxS9TJPrFjOHJKmh06ro=")

# httpx makes a TLS context for every client, loading certifi's CA bundle: ~34 ms of CPU
# each, paid by thousands of the suite's clients (one per API test, one per `httpx.get`)
# though every server they call is plain HTTP on loopback. The suite's clients share one
# context per set of arguments (a context is safe to share between clients and threads).
_shared_tls = functools.lru_cache(maxsize=None)(httpx.create_ssl_context)
_transports.create_ssl_context = _shared_tls  # type: ignore[attr-defined]

settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")


def _postgres_url() -> str:
    return os.environ.get("RECOUP_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def postgres_unreachable(url: str) -> str | None:
    """Why the PostgreSQL at `url` cannot be used, or None when it answers."""
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL at {url} is unreachable: {exc}".splitlines()[0]
    return None


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    """The test PostgreSQL's URL; skips (or fails under CI=true) when it is unreachable."""
    url = _postgres_url()
    reason = postgres_unreachable(url)
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return url


@pytest.fixture(scope="session")
def postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A database of this test process's own on the test PostgreSQL (emptied when claimed, kept
    for a later run), so that processes never wait on one another's locks; tests make their
    schemas in it."""
    database = ProcessDatabase(postgres_server_url)
    try:
        yield database.url
    finally:
        database.release()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, made once per test process, that tests copy."""
    return make_sqlite_template(tmp_path_factory.mktemp("sqlite-template"))


@pytest.fixture(scope="session")
def postgres_schemas(postgres_url: str) -> Iterator[MigratedSchemas]:
    """Migrated schemas in this process's database, emptied after each test for the next."""
    with MigratedSchemas(postgres_url) as schemas:
        yield schemas


@pytest.fixture(autouse=True)
def _no_stray_log_handler() -> Iterator[None]:
    """A command run in process (`main([...])`) sends the root logger to that test's captured
    stderr (`recoup.logs.configure_logging`), which pytest closes after the test: later records,
    from an SMTP server's thread say, went to a closed file ("--- Logging error ---" in the
    run's output). Each test ends with the root logger's own handlers and level as it found
    them (pytest's capture handlers, which it adds and removes itself, left alone)."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if type(handler) is logging.StreamHandler and handler not in before:
            root.removeHandler(handler)
    root.setLevel(level)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the slow tests (`slow`: seconds each) first in every worker's share, dealt
    out in turn, so that they start together at the beginning of the run instead of meeting
    in one worker's share or at its end, where the run would wait for them alone. Work
    stealing (`scripts/test`) gives the k-th of N workers the k-th contiguous share of the
    collection, of `len(pending) // workers_left` items, and later moves the tail of a share
    (the quick tests) to a worker that is done."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if workers < 2 or not slow or config.getoption("dist") != "worksteal":
        return
    dealt = [slow[k::workers] for k in range(workers)]
    if len(dealt[0]) > len(items) // workers:
        return  # more slow tests than a share holds: leave the order as collected
    rest = iter([item for item in items if item.get_closest_marker("slow") is None])
    left = len(items)
    order: list[pytest.Item] = []
    for k in range(workers):
        size = left // (workers - k)
        left -= size
        order += dealt[k] + [next(rest) for _ in range(size - len(dealt[k]))]
    items[:] = order
