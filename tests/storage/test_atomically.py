"""`atomically` on both backends: an idempotency key's claim, a job's insert and the stored
response as one transaction (what `POST /v1/jobs` runs), committed together or not at all, and
on SQLite shared by concurrent units (group commit) without one unit's failure touching
another's writes."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.errors import Conflict
from recoup.idempotency import New, Replay
from recoup.jobs.model import Job, NewJob, PythonTarget
from recoup.storage import ApiTables, Store, open_api_tables
from recoup.tenancy import new_tenant
from tests.storage.conftest import Backend

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def tables(store: Store) -> ApiTables:
    store.ensure_tenant(new_tenant("a", now=NOW))
    return open_api_tables(store)


def claim(tables: ApiTables, key: str) -> Any:
    return tables.begin(
        tenant="a", key=key, fingerprint="f", method="POST", path="/v1/jobs", now=NOW
    )


def new_job(name: str | None = None) -> NewJob:
    return NewJob(
        run_at=NOW + timedelta(hours=1), target=PythonTarget(handler="h"), tenant="a", name=name
    )


def request(store: Store, tables: ApiTables, key: str, job: NewJob, *, fail: bool = False) -> Job:
    """What an atomic POST runs: claim, insert, store the response (or fail after both)."""
    outcome = claim(tables, key)
    assert isinstance(outcome, New)
    stored = store.insert(job, now=NOW)
    if fail:
        raise LookupError("the request failed after its writes")
    tables.complete(
        tenant="a",
        key=key,
        locked_at=outcome.locked_at,
        status=201,
        body=stored.id.encode(),
        content_type="text/plain",
    )
    return stored


def test_a_unit_commits_its_claim_insert_and_response_together(
    backend: Backend, store: Store, tables: ApiTables
) -> None:
    job = tables.atomically(lambda: request(store, tables, "k1", new_job()))
    # Committed: another store on the same database (other connections) sees all of it.
    other = open_api_tables(backend.open())
    assert claim(other, "k1") == Replay(status=201, body=job.id.encode(), content_type="text/plain")
    assert store.get("a", job.id) is not None


def test_a_unit_that_raises_leaves_nothing_not_even_its_claim(
    store: Store, tables: ApiTables
) -> None:
    job = new_job()
    with pytest.raises(LookupError):
        tables.atomically(lambda: request(store, tables, "k1", job, fail=True))
    assert store.get("a", job.id) is None
    assert isinstance(claim(tables, "k1"), New)  # free at once: no stale lock to wait out


def test_a_nested_unit_is_part_of_the_outer_one(store: Store, tables: ApiTables) -> None:
    job = new_job()

    def outer() -> None:
        tables.atomically(lambda: store.insert(job, now=NOW))
        raise LookupError("the outer unit fails after the nested one returned")

    with pytest.raises(LookupError):
        tables.atomically(outer)
    assert store.get("a", job.id) is None


def test_a_refusal_caught_inside_a_unit_keeps_the_units_other_writes(
    store: Store, tables: ApiTables
) -> None:
    store.insert(new_job("taken"), now=NOW)
    kept = new_job()

    def unit() -> None:
        store.insert(kept, now=NOW)
        with pytest.raises(Conflict):
            store.insert(new_job("taken"), now=NOW)  # a live name clash, decided by the store

    tables.atomically(unit)
    assert store.get("a", kept.id) is not None


def test_concurrent_units_commit_or_fail_each_on_its_own(store: Store, tables: ApiTables) -> None:
    jobs = [new_job() for _ in range(12)]
    failing = {3, 7}
    barrier = threading.Barrier(len(jobs))
    outcomes: dict[int, Any] = {}

    def post(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = tables.atomically(
                lambda: request(store, tables, f"k{i}", jobs[i], fail=i in failing)
            )
        except LookupError as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for i, job in enumerate(jobs):
        if i in failing:
            assert isinstance(outcomes[i], LookupError)
            assert store.get("a", job.id) is None
            assert isinstance(claim(tables, f"k{i}"), New)
        else:
            assert isinstance(outcomes[i], Job) and outcomes[i].id == job.id
            assert store.get("a", job.id) is not None
            assert claim(tables, f"k{i}") == Replay(
                status=201, body=job.id.encode(), content_type="text/plain"
            )
