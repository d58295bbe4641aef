"""Every app `create_app` makes in a process serves the same route objects (FastAPI works out
an included route's handling once per include), and each still answers from its own store; a
router whose handlers no shared include would run is refused."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi import APIRouter

from recoup.api.app import create_app
from recoup.api.shared_routes import include_once
from recoup.storage import open_api_tables
from recoup.storage.sqlite.store import SqliteStore
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import TARGET, Api, api_settings
from tests.support import ServerThread


def test_two_apps_share_their_routes_and_each_answers_from_its_own_store(
    api: Api, tmp_path: Path
) -> None:
    other_store = SqliteStore(str(tmp_path / "other.db"))
    try:
        other = create_app(other_store, clock=SystemClock(), settings=api_settings())
        shared = [route for route in api.app.router.routes if route in other.router.routes]
        # The ten routers of /v1, QStash and the probes, and the dashboard's eight: one each.
        assert len(shared) >= 18
        mine = api.tenant("acme")
        now = SystemClock().now()
        other_store.ensure_tenant(new_tenant("acme", now=now))
        theirs = issue_token(open_api_tables(other_store), "acme", now=now).secret
        job = {"name": "only-here", "target": {"url": TARGET}, "delay_seconds": 60}
        assert api.http(mine).post("/v1/jobs", json=job).status_code == 201
        with (
            ServerThread(other) as served,
            httpx.Client(
                base_url=served.url, headers={"Authorization": f"Bearer {theirs}"}
            ) as http,
        ):
            assert http.get("/v1/jobs").json()["jobs"] == []
            # Each app knows only its own store's tokens.
            assert http.get("/v1/jobs", headers=mine.auth).status_code == 401
        listed = api.http(mine).get("/v1/jobs").json()["jobs"]
        assert [j["name"] for j in listed] == ["only-here"]
    finally:
        other_store.close()


def test_a_shared_router_with_startup_handlers_is_refused() -> None:
    starting = APIRouter(on_startup=[lambda: None])
    with pytest.raises(RuntimeError, match="startup or shutdown handlers"):
        include_once(APIRouter(), starting)
