"""One `recoup serve` per test module and backend, for the CLI's `--url` tests: the app under
uvicorn on a free loopback port over a store of its own. Each test takes a fresh tenant of
it (`Served.tenant`), so the tests of a module share the server and never each other's data.

`Served.local` and `Served.remote` are the CLI options that name the same tenant both ways
(its database, or the server and its token), so a test can run one command both ways and
compare what they print."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from recoup.api.app import create_app
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.storage import Store, open_api_tables, open_store
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import api_settings
from tests.storage.conftest import _drop_schema
from tests.support import ServerThread


@dataclass(frozen=True)
class Tenant:
    name: str
    token: str
    local: list[str]  # --db (and --schema) and --tenant
    remote: list[str]  # --url and --token


@dataclass
class Served:
    url: str
    db: list[str]  # the CLI's options naming the server's database
    store: Store

    def tenant(self) -> Tenant:
        name = f"t-{uuid.uuid4().hex[:8]}"
        now = SystemClock().now()
        self.store.ensure_tenant(new_tenant(name, now=now))
        token = issue_token(open_api_tables(self.store), name, now=now).secret
        return Tenant(
            name,
            token,
            local=[*self.db, "--tenant", name],
            remote=["--url", self.url, "--token", token],
        )

    def scheduler(self) -> Scheduler:
        return Scheduler(self.store, clock=SystemClock(), ssrf=SsrfGuard(allow_private=True))


def _serve(store: Store, url: str, db: list[str]) -> Iterator[Served]:
    app = create_app(store, clock=SystemClock(), settings=api_settings())
    try:
        with ServerThread(app) as server:
            yield Served(server.url, db, store)
    finally:
        store.close()


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    if request.param == "sqlite":
        path: Path = tmp_path_factory.mktemp("served") / "recoup.db"
        url = f"sqlite:///{path}"
        yield from _serve(open_store(url), url, ["--db", url])
        return
    url = request.getfixturevalue("postgres_url")
    schema = f"test_{uuid.uuid4().hex[:12]}"
    try:
        yield from _serve(open_store(url, schema=schema), url, ["--db", url, "--schema", schema])
    finally:
        _drop_schema(url, schema)


__all__ = ["Served", "Tenant", "served"]
