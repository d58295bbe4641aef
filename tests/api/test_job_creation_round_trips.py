"""What one usual `POST /v1/jobs` costs the database (`recoup.storage.job_creations`): on
PostgreSQL one statement in autocommit (one round trip), on SQLite plain statements in one
transaction with no savepoint; and its answer is the job as the store reads it back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from recoup.errors import StorageError
from recoup.jobs.model import HttpTarget, NewJob
from recoup.storage import ApiTables, Store
from recoup.storage.job_creations import Created, Declined, JobCreation, KeyClaim
from recoup.tenancy import new_tenant
from tests.api.conftest import TARGET, Api
from tests.storage.conftest import Backend, only_on

# Keys of differing lengths out of order: jsonb reorders them, the stored answer must agree.
BODY = {
    "target": {"url": TARGET, "headers": {"X-Long-Header": "1", "X-B": "2"}},
    "delay_seconds": 3600,
    "metadata": {"zeta": "1", "a": "2", "mid": "3"},
}


NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class _Statements:
    """The statements the store's connections run, with whether each ran in autocommit."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []


@pytest.fixture
def pg_statements(monkeypatch: pytest.MonkeyPatch) -> _Statements:
    statements = _Statements()
    original = psycopg.Connection.execute

    def counted(self: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.seen.append((str(query), self.autocommit))
        return original(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", counted)
    return statements


def _sqlite_trace(api: Api) -> list[str]:
    traced: list[str] = []
    dialect = api.store.dialect  # type: ignore[attr-defined]
    with dialect._all_lock:
        for conn in dialect._all:
            conn.set_trace_callback(traced.append)
    return traced


@only_on("postgres")
def test_a_job_with_a_key_costs_postgresql_one_round_trip(
    api: Api, pg_statements: _Statements
) -> None:
    http = api.http(api.tenant())
    assert http.post("/v1/jobs", json=BODY).status_code == 201  # the token is cached now
    for n, key in enumerate([None, "rt-1"]):
        pg_statements.seen.clear()
        headers = {} if key is None else {"Idempotency-Key": key}
        answer = http.post("/v1/jobs", json=BODY, headers=headers)
        assert answer.status_code == 201, answer.text
        assert len(pg_statements.seen) == 1, (n, pg_statements.seen)
        assert pg_statements.seen[0][1] is True  # autocommit: no BEGIN, no COMMIT to wait for
    pg_statements.seen.clear()
    again = http.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": "rt-1"})
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.content == answer.content


@only_on("sqlite")
def test_a_job_with_a_key_costs_sqlite_one_transaction_without_savepoints(api: Api) -> None:
    http = api.http(api.tenant())
    # The first through the declared route (in the thread pool) caches the token; the second
    # through the fast path opens the event loop's own connection, which the trace then has.
    for _ in range(2):
        assert http.post("/v1/jobs", json=BODY).status_code == 201
    traced = _sqlite_trace(api)
    answer = http.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": "rt-2"})
    assert answer.status_code == 201, answer.text
    words = [statement.split()[0].upper() for statement in traced]
    assert "SAVEPOINT" not in words
    assert words.count("BEGIN") == 1 and words.count("COMMIT") == 1
    # BEGIN, the epoch, the claim, the insert, the stored answer, the wake-up, COMMIT.
    assert len(words) <= 7, traced


def test_the_answer_stored_under_the_key_is_the_job_as_read_back(api: Api) -> None:
    http = api.http(api.tenant())
    assert http.post("/v1/jobs", json=BODY).status_code == 201
    created = http.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": "rt-3"})
    assert created.status_code == 201
    read = http.get(f"/v1/jobs/{created.json()['id']}")
    assert read.status_code == 200
    # `waiting_for` is what a read adds (whether a flow key holds the job now).
    shown = {k: v for k, v in read.json().items() if k != "waiting_for"}
    assert {k: v for k, v in created.json().items() if k != "waiting_for"} == shown
    # Byte for byte in the keys' order too: jsonb's order, which a read gives.
    assert list(created.json()["metadata"]) == list(read.json()["metadata"])
    assert list(created.json()["target"]["headers"]) == list(read.json()["target"]["headers"])
    replay = http.post("/v1/jobs", json=BODY, headers={"Idempotency-Key": "rt-3"})
    assert replay.content == created.content


def test_numbers_the_store_rewrites_are_answered_as_a_read_gives_them(api: Api) -> None:
    # 1e16 and up Python writes with an exponent; jsonb's numeric reads them as whole numbers.
    body = {**BODY, "target": {"url": TARGET, "body": {"big": 6.483249895288715e16, "x": 1.5}}}
    http = api.http(api.tenant())
    for key in (None, "rt-4"):
        headers = {} if key is None else {"Idempotency-Key": key}
        created = http.post("/v1/jobs", json=body, headers=headers)
        assert created.status_code == 201
        read = http.get(f"/v1/jobs/{created.json()['id']}")
        assert created.json()["target"]["body"] == read.json()["target"]["body"]
        assert b'"big":' + str(read.json()["target"]["body"]["big"]).encode() in created.content


def test_a_key_whose_job_clashes_is_answered_the_general_way_and_not_left_claimed(
    api: Api,
) -> None:
    http = api.http(api.tenant())
    body = {**BODY, "idempotency_key": "job-key"}
    first = http.post("/v1/jobs", json=body, headers={"Idempotency-Key": "a-1"})
    assert first.status_code == 201
    # Another request key, the same job key: the one-unit creation meets the job, undoes its
    # claim, and the general path answers 200 with the first job, stored under "a-2".
    second = http.post("/v1/jobs", json=body, headers={"Idempotency-Key": "a-2"})
    assert second.status_code == 200, second.text
    assert second.json()["id"] == first.json()["id"]
    replay = http.post("/v1/jobs", json=body, headers={"Idempotency-Key": "a-2"})
    assert replay.status_code == 200
    assert replay.headers["Idempotent-Replayed"] == "true"


@only_on("postgres")
def test_only_the_clash_functions_own_error_is_taken_for_a_clash(
    backend: Backend, store: Store, tables: ApiTables
) -> None:
    tenant = store.ensure_tenant(new_tenant("t-clash", now=NOW)).id

    def create(key: str) -> Created | Declined:
        job = NewJob(
            run_at=NOW + timedelta(hours=1),
            target=HttpTarget(url=TARGET),
            tenant=tenant,
            idempotency_key="job-key",
        )
        claim = KeyClaim(key=key, fingerprint="f", method="POST", path="/v1/jobs")
        creation = JobCreation(
            job=job, now=NOW, epoch=tables.token_epoch(), claim=claim, answer=lambda _: b"{}"
        )
        return tables.create_job(creation)

    assert isinstance(create("a-1"), Created)
    # The same job under another request key: migration 0020's error, its claim undone.
    assert create("a-2") == Declined(stale=False)
    # The same message under another SQLSTATE is a failure of the statement, not a clash (the
    # changed function makes the schema pool drop this schema after the test).
    backend.execute(
        "CREATE OR REPLACE FUNCTION recoup_job_clashed() RETURNS boolean LANGUAGE plpgsql AS $$"
        " BEGIN RAISE EXCEPTION 'recoup: job clashed, key undone'; END $$"
    )
    with pytest.raises(StorageError, match="recoup: job clashed"):
        create("a-3")
    keys = [line for line in backend.dump().splitlines() if line.startswith("idempotency_keys:")]
    assert [line.split(",")[1] for line in keys] == ["a-1"]  # neither later claim was left
