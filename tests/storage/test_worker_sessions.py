"""Worker sessions (ARCHITECTURE.md, 'Worker sessions'): a worker registers while it runs; a
dead one (a process killed with SIGKILL) is found by the evidence its backend has, and its jobs
are handed back as lost runs without spending an attempt; a live one is never found dead,
however late its heartbeat. On every backend, then each backend's own evidence: SQLite's
heartbeat for a process it cannot look up, PostgreSQL's session lock.

A dead worker is a real process: it opens a session and claims jobs, then is killed."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from recoup.jobs.model import BackoffPolicy, JobState, NewJob, PythonTarget, RunOutcome
from recoup.jobs.processes import this_process
from recoup.jobs.store import ClaimParams
from recoup.jobs.worker_records import Beat, SessionRules, WorkerInfo
from recoup.storage.rules import lost_session_error
from tests.storage.conftest import Backend, Store
from tests.support import wait_until

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
# The strictest rules there are: any heartbeat at all is late.
STRICT = SessionRules(grace=timedelta(0), dead_after=timedelta(0))
# Only proof that a session ended counts (SQLite: the process is gone; PostgreSQL: the lock
# is free), never a late heartbeat alone.
PROOF_ONLY = SessionRules(grace=timedelta(0), dead_after=HOUR)
DEADLINE = 30.0  # seconds a real process may take to start, or the database to notice it died

# Opens a session for argv[3], claims every due job under it, says how many, waits to die.
DOOMED = """
import sys, time
from datetime import datetime, timedelta
from recoup.jobs.processes import this_process
from recoup.jobs.store import ClaimParams
from recoup.jobs.worker_records import Beat, SessionRules, WorkerInfo
from recoup.storage import open_store

url, schema, worker, now = sys.argv[1:5]
store = open_store(url, **({"schema": schema} if schema else {}))
now = datetime.fromisoformat(now)
rules = SessionRules(grace=timedelta(seconds=1), dead_after=timedelta(hours=1))
assert store.open_worker_session(this_process(worker), now=now, rules=rules) is not None
params = ClaimParams(worker_id=worker, now=now, horizon=timedelta(0), lease=timedelta(hours=1),
                     limit=100)
print(len(store.claim_due(params)), flush=True)
time.sleep(600)
"""


@pytest.fixture
def killed(backend: Backend) -> Iterator[Callable[[str], int]]:
    """`killed(worker_id)`: a process opens a session under that id and claims every due job
    (how many it claimed is returned), then dies by SIGKILL (and is reaped)."""
    started: list[subprocess.Popen[str]] = []

    def kill(worker_id: str) -> int:
        process = subprocess.Popen(
            [sys.executable, "-c", DOOMED, backend.url, backend.schema or "", worker_id, str(T0)],
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None
        claimed = int(process.stdout.readline())
        process.send_signal(signal.SIGKILL)
        process.wait(DEADLINE)
        return claimed

    yield kill
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(DEADLINE)
        if process.stdout is not None:
            process.stdout.close()


def _claim(store: Store, worker: str, now: datetime = T0) -> list[str]:
    params = ClaimParams(worker_id=worker, now=now, horizon=timedelta(0), lease=HOUR, limit=100)
    return [job.id for job in store.claim_due(params)]


def test_a_session_registers_beats_and_closes(store: Store) -> None:
    me = this_process("w1")
    session = store.open_worker_session(me, now=T0, rules=PROOF_ONLY)
    assert session is not None
    (registered,) = store.workers()
    assert (registered.id, registered.pid, registered.process_key) == ("w1", me.pid, me.process_key)
    assert registered.heartbeat_at >= registered.started_at
    assert session.beat() is Beat.ALIVE
    (beaten,) = store.workers()
    assert beaten.heartbeat_at >= registered.heartbeat_at
    session.close()
    assert store.workers() == []


def test_a_worker_id_has_one_live_session_at_a_time(store: Store) -> None:
    me = this_process("w1")
    first = store.open_worker_session(me, now=T0, rules=STRICT)
    assert first is not None
    # Another worker under the same id, however strict the rules: refused while it lives.
    assert store.open_worker_session(me, now=T0, rules=STRICT) is None
    first.close()
    second = store.open_worker_session(me, now=T0, rules=STRICT)
    assert second is not None
    second.close()


def test_a_live_worker_is_never_found_dead_however_late_its_heartbeat(store: Store) -> None:
    session = store.open_worker_session(this_process("slow"), now=T0, rules=STRICT)
    assert session is not None
    inserted = store.insert(NewJob(run_at=T0, target=PythonTarget(handler="noop")), now=T0)
    assert _claim(store, "slow") == [inserted.id]
    # Its session shows it alive (PostgreSQL: its lock is held; SQLite: its process runs).
    assert store.rescue_dead_workers(now=T0 + HOUR, rules=STRICT) == {}
    running = store.get("default", inserted.id)
    assert running is not None and running.state is JobState.RUNNING and running.attempts == 1
    assert store.runs("default", inserted.id) == []
    session.close()


@pytest.mark.slow
def test_a_killed_workers_jobs_are_handed_back_as_lost_without_spending_an_attempt(
    store: Store, killed: Callable[[str], int]
) -> None:
    last = store.insert(
        NewJob(run_at=T0, target=PythonTarget(handler="noop"), retry=BackoffPolicy(max_attempts=1)),
        now=T0,
    )
    other = store.insert(NewJob(run_at=T0, target=PythonTarget(handler="noop")), now=T0)
    assert killed("doomed") == 2
    assert [w.id for w in store.workers()] == ["doomed"]
    later = T0 + timedelta(minutes=1)  # long before their hour-long leases expire
    found: dict[str, list[str]] = {}

    def rescued() -> bool:
        found.update(store.rescue_dead_workers(now=later, rules=PROOF_ONLY))
        return bool(found)

    assert wait_until(rescued, DEADLINE)
    assert set(found) == {"doomed"} and sorted(found["doomed"]) == sorted([last.id, other.id])
    assert store.workers() == []
    assert store.rescue_dead_workers(now=later, rules=PROOF_ONLY) == {}  # handed back once
    for inserted in (last, other):
        back = store.get("default", inserted.id)
        assert back is not None and back.state is JobState.SCHEDULED and back.run_at == later
        assert back.attempts == 1 and back.last_error == lost_session_error("doomed")
        (run,) = store.runs("default", inserted.id)
        assert (run.attempt, run.outcome, run.worker_id) == (1, RunOutcome.LOST, "doomed")
        assert run.error == lost_session_error("doomed")
    # The lost attempt was the last one: the job gets one more, numbered on.
    back_last = store.get("default", last.id)
    assert back_last is not None and back_last.retry.max_attempts == 2
    assert sorted(_claim(store, "next", later)) == sorted([last.id, other.id])
    again = store.get("default", last.id)
    assert again is not None and again.attempts == 2


@pytest.mark.slow
def test_a_restart_under_the_same_id_hands_back_what_the_dead_session_held(
    store: Store, killed: Callable[[str], int]
) -> None:
    inserted = store.insert(NewJob(run_at=T0, target=PythonTarget(handler="noop")), now=T0)
    assert killed("fixed-id") == 1
    me = this_process("fixed-id")
    session = None

    def opened() -> bool:
        nonlocal session
        session = store.open_worker_session(me, now=T0 + HOUR, rules=PROOF_ONLY)
        return session is not None

    assert wait_until(opened, DEADLINE)
    assert session is not None
    back = store.get("default", inserted.id)
    assert back is not None and back.state is JobState.SCHEDULED and back.attempts == 1
    assert [r.outcome for r in store.runs("default", inserted.id)] == [RunOutcome.LOST]
    (registered,) = store.workers()
    assert registered.pid == me.pid
    session.close()


# SQLite: a process in another PID namespace (a container sharing the file) cannot be looked
# up; its heartbeat alone tells.


def test_sqlite_a_worker_it_cannot_look_up_is_dead_once_its_heartbeat_is_too_old(
    tmp_path: Path,
) -> None:
    from recoup.storage.sqlite.store import SqliteStore

    store = SqliteStore(str(tmp_path / "shared.db"))
    elsewhere = WorkerInfo(
        id="elsewhere", host="container-2", pid=7, process_key="another-boot:pid:[1]:99"
    )
    session = store.open_worker_session(elsewhere, now=T0, rules=PROOF_ONLY)
    assert session is not None
    inserted = store.insert(NewJob(run_at=T0, target=PythonTarget(handler="noop")), now=T0)
    assert _claim(store, "elsewhere") == [inserted.id]
    assert session.beat() is Beat.ALIVE
    young = SessionRules(grace=timedelta(0), dead_after=HOUR)
    assert store.rescue_dead_workers(now=T0, rules=young) == {}
    # A fresh heartbeat also keeps its id from being taken over.
    assert store.open_worker_session(elsewhere, now=T0, rules=young) is None
    assert store.rescue_dead_workers(now=T0, rules=STRICT) == {"elsewhere": [inserted.id]}
    assert [r.outcome for r in store.runs("default", inserted.id)] == [RunOutcome.LOST]
    # The worker, should it live after all, learns at its next beat that it must give up.
    assert session.beat() is Beat.GONE
    store.close()


# PostgreSQL: the session is a connection holding an advisory lock.


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[Any]:
    from recoup.storage.postgres.store import PostgresStore

    schema = f"test_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(postgres_url, schema=schema)
    yield store
    store.close()
    _drop_schema(postgres_url, schema)


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.postgres
def test_postgres_a_session_whose_connection_is_terminated_ends_at_once(
    pg_store: Any, postgres_url: str
) -> None:
    import psycopg

    from recoup.storage.postgres.workers import APPLICATION_NAME

    session = pg_store.open_worker_session(this_process("cut-off"), now=T0, rules=PROOF_ONLY)
    assert session is not None
    inserted = pg_store.insert(NewJob(run_at=T0, target=PythonTarget(handler="noop")), now=T0)
    assert _claim(pg_store, "cut-off") == [inserted.id]
    assert pg_store.rescue_dead_workers(now=T0, rules=PROOF_ONLY) == {}  # its lock is held
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        (terminated,) = admin.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (APPLICATION_NAME.format(id="cut-off"),),
        ).fetchone()
    assert terminated is True
    assert session.beat() is Beat.LOST  # the worker learns its lock may be gone
    assert pg_store.rescue_dead_workers(now=T0, rules=PROOF_ONLY) == {"cut-off": [inserted.id]}
    session.drop()


@pytest.mark.postgres
def test_postgres_the_grace_leaves_a_worker_time_to_notice_its_session_ended(
    pg_store: Any,
) -> None:
    session = pg_store.open_worker_session(this_process("w"), now=T0, rules=PROOF_ONLY)
    assert session is not None
    session.drop()  # the lock is freed as the server ends the backend; the heartbeat is fresh
    lenient = SessionRules(grace=HOUR, dead_after=HOUR)
    assert pg_store.rescue_dead_workers(now=T0, rules=lenient) == {}
    # The client's close returns before the server has ended the backend and freed its lock:
    # wait for that, not for a fixed time.
    found: list[dict[str, list[str]]] = []

    def rescued() -> bool:
        found.append(pg_store.rescue_dead_workers(now=T0, rules=PROOF_ONLY))
        return found[-1] != {}

    assert wait_until(rescued, DEADLINE)
    assert found[-1] == {"w": []}


@pytest.mark.postgres
def test_postgres_workers_of_two_schemas_never_share_a_lock(postgres_url: str) -> None:
    from recoup.storage.postgres.store import PostgresStore

    schemas = [f"test_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    stores = [PostgresStore(postgres_url, schema=schema) for schema in schemas]
    try:
        sessions = [
            store.open_worker_session(this_process("same-id"), now=T0, rules=STRICT)
            for store in stores
        ]
        assert all(session is not None for session in sessions)
        for session in sessions:
            assert session is not None
            session.close()
    finally:
        for store, schema in zip(stores, schemas, strict=True):
            store.close()
            _drop_schema(postgres_url, schema)


def test_a_worker_reopening_its_own_session_keeps_its_jobs_or_hands_them_back(
    store: Store,
) -> None:
    me = this_process("w1")
    first = store.open_worker_session(me, now=T0, rules=PROOF_ONLY)
    assert first is not None
    kept, given_up = (
        store.insert(NewJob(run_at=T0, target=PythonTarget(handler="noop")), now=T0)
        for _ in range(2)
    )
    assert sorted(_claim(store, "w1")) == sorted([kept.id, given_up.id])
    first.drop()  # its connection lost, say
    again = store.open_worker_session(me, now=T0, rules=PROOF_ONLY, replacing=True)
    assert again is not None
    # Re-opening its own session changes nothing of what it runs...
    for job_id in (kept.id, given_up.id):
        running = store.get("default", job_id)
        assert running is not None and running.state is JobState.RUNNING
    # ...until it hands back what it gave up meanwhile (here: both), as lost.
    assert sorted(again.hand_back(now=T0 + HOUR)) == sorted([kept.id, given_up.id])
    assert [r.outcome for r in store.runs("default", kept.id)] == [RunOutcome.LOST]
    assert again.hand_back(now=T0 + HOUR) == []
    again.close()
