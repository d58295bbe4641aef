"""Fixtures of the HTTP API tests: a store per backend, and a real server on a free port.

Every test runs once per backend, through the one `backend` fixture (tests/storage/conftest.py:
a SQLite file in the test's temporary directory, or a fresh PostgreSQL schema dropped
afterwards). The server is uvicorn in a thread, so requests go through real sockets,
concurrency included; targets on 127.0.0.1 are allowed explicitly (`allow_private=True`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from recoup.api.app import ApiSettings, create_app
from recoup.jobs.ssrf import SsrfGuard
from recoup.storage import ApiTables, Store, open_api_tables
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
from tests.storage.conftest import backend, store
from tests.support import ServerThread

__all__ = ["backend", "store"]  # the per-backend fixtures, shared with tests/storage

TARGET = "http://127.0.0.1:9/hook"  # never called: no worker runs in these tests


@dataclass(frozen=True)
class Caller:
    """A tenant and one of its tokens."""

    tenant: str
    token: str
    signing_secret: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class Api:
    url: str
    store: Store
    tables: ApiTables
    app: FastAPI
    clients: list[httpx.Client] = field(default_factory=list)

    def tenant(self, name: str | None = None) -> Caller:
        tenant_id = name or f"t-{uuid.uuid4().hex[:8]}"
        now = SystemClock().now()
        tenant = self.store.ensure_tenant(new_tenant(tenant_id, now=now))
        issued = issue_token(self.tables, tenant_id, now=now)
        return Caller(tenant_id, issued.secret, tenant.signing_secret)

    def http(self, caller: Caller | None = None) -> httpx.Client:
        client = httpx.Client(
            base_url=self.url, headers=caller.auth if caller else {}, timeout=30.0
        )
        self.clients.append(client)
        return client


@pytest.fixture
def tables(store: Store) -> ApiTables:
    return open_api_tables(store)


def api_settings(**overrides: Any) -> ApiSettings:
    options: dict[str, Any] = {"ssrf": SsrfGuard(allow_private=True), "prune_every": None}
    options.update(overrides)
    return ApiSettings(**options)


@pytest.fixture
def make_api(store: Store, tables: ApiTables) -> Iterator[Callable[..., Api]]:
    """Starts an API server over the test's store with the given settings overrides."""
    stack: list[tuple[ServerThread, Api]] = []

    def make(**overrides: Any) -> Api:
        app = create_app(store, clock=SystemClock(), settings=api_settings(**overrides))
        server = ServerThread(app).__enter__()
        api = Api(server.url, store, tables, app)
        stack.append((server, api))
        return api

    yield make
    for server, api in reversed(stack):
        for client in api.clients:
            client.close()
        server.__exit__(None, None, None)


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    return make_api()
