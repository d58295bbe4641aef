"""The same request gets the same status on SQLite and PostgreSQL, and never a 5xx: hypothesis
mutates the write routes' bodies with the inputs issue 24 found (non-finite numbers, ids with
`/` and markup, booleans as strings, control characters, oversized headers, cron steps) and
sends each to a server over each backend (one tenant per backend, one server each for the
module, bodies applied to fresh names so that earlier examples change nothing)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.api.app import create_app
from recoup.storage import Store, open_api_tables
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import TARGET, api_settings
from tests.support import ServerThread

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def clients(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str
) -> Iterator[dict[str, httpx.Client]]:
    from recoup.storage.postgres.store import PostgresStore
    from recoup.storage.sqlite.store import SqliteStore

    schema = f"test_{uuid.uuid4().hex[:12]}"
    path = Path(tmp_path_factory.mktemp("both")) / "recoup.db"
    stores: dict[str, Store] = {
        "sqlite": SqliteStore(str(path)),
        "postgres": PostgresStore(postgres_url, schema=schema, min_size=1, max_size=4),
    }
    servers, made = [], {}
    try:
        for name, store in stores.items():
            now = SystemClock().now()
            store.ensure_tenant(new_tenant("fuzz", now=now))
            token = issue_token(open_api_tables(store), "fuzz", now=now).secret
            app = create_app(store, clock=SystemClock(), settings=api_settings())
            server = ServerThread(app).__enter__()
            servers.append(server)
            made[name] = httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
            )
        yield made
    finally:
        for client in made.values():
            client.close()
        for server in servers:
            server.__exit__(None, None, None)
        for store in stores.values():
            store.close()
        import psycopg

        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


NUMBERS = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1.5", "0", "1e308"])
TEXTS = st.sampled_from(
    ["ok", "2026/0042", "<b>x</b>", "a\x1b[2Jb", "tab\t", "\x7f", "x" * 300, "", "a@b", "in_1"]
)
FLAGS = st.sampled_from(["true", "yes", "on", "1", "0", "false", "null", "true_json"])
CRONS = st.sampled_from(
    ["*/99999999999999999999 * * * *", "*/0 * * * *", "*/15 * * * *", "0 */25 * * *", "x"]
)


def job_text(name: str, number: str, header_size: int) -> str:
    headers = json.dumps({"X-A": "v" * header_size})
    body = f'{{"n": [{number}]}}'
    return (
        f'{{"delay_seconds": 3600, "name": {json.dumps(name)}, '
        f'"target": {{"url": "{TARGET}", "headers": {headers}, "body": {body}}}}}'
    )


def schedule_text(name: str, number: str, cron: str) -> str:
    return (
        f'{{"cron": {json.dumps(cron)}, "timezone": "UTC", "name": {json.dumps(name)}, '
        f'"target": {{"url": "{TARGET}", "body": [{number}]}}}}'
    )


def failure_text(invoice_id: str) -> str:
    return json.dumps(
        {
            "invoice_id": invoice_id,
            "customer_id": "cus_1",
            "amount": 1999,
            "currency": "usd",
            "failed_at": "2026-03-02T10:00:00Z",
            "timezone": "UTC",
            "decline_code": "insufficient_funds",
            "charge_url": TARGET,
        }
    )


def fresh(text: str) -> str:
    """A name or id no earlier example used (the mutation kept, made unique)."""
    return f"{text}{uuid.uuid4().hex[:8]}" if text else text


def statuses(clients: dict[str, httpx.Client], method: str, path: str, text: str) -> set[int]:
    seen = set()
    for client in clients.values():
        answer = client.request(
            method, path, content=text, headers={"content-type": "application/json"}
        )
        assert answer.status_code < 500, (path, text[:300], answer.text[:300])
        seen.add(answer.status_code)
    return seen


SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(name=TEXTS, number=NUMBERS, header_size=st.sampled_from([1, 8192, 8193, 100_000]))
def test_a_job_body_gets_the_same_status_on_both_backends(
    clients: dict[str, httpx.Client], name: str, number: str, header_size: int
) -> None:
    name = fresh(name)
    assert len(statuses(clients, "POST", "/v1/jobs", job_text(name, number, header_size))) == 1


@SETTINGS
@given(name=TEXTS, number=NUMBERS, cron=CRONS)
def test_a_schedule_body_gets_the_same_status_on_both_backends(
    clients: dict[str, httpx.Client], name: str, number: str, cron: str
) -> None:
    text = schedule_text(fresh(name), number, cron)
    assert len(statuses(clients, "POST", "/v1/schedules", text)) == 1


@SETTINGS
@given(invoice_id=TEXTS)
def test_a_failure_gets_the_same_status_on_both_backends(
    clients: dict[str, httpx.Client], invoice_id: str
) -> None:
    found = statuses(clients, "POST", "/v1/dunning/failures", failure_text(fresh(invoice_id)))
    assert len(found) == 1


@SETTINGS
@given(flag=FLAGS)
def test_a_schedule_patch_gets_the_same_status_on_both_backends(
    clients: dict[str, httpx.Client], flag: str
) -> None:
    value = "true" if flag == "true_json" else json.dumps(flag)
    seen: set[int] = set()
    for client in clients.values():
        made: Any = client.post(
            "/v1/schedules",
            json={"cron": "0 9 * * *", "timezone": "UTC", "target": {"url": TARGET}},
        ).json()
        answer = client.patch(
            f"/v1/schedules/{made['id']}",
            content=f'{{"paused": {value}}}',
            headers={"content-type": "application/json"},
        )
        assert answer.status_code < 500
        seen.add(answer.status_code)
    assert seen == ({200} if flag == "true_json" else {422})
