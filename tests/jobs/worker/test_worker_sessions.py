"""The worker's own session (ARCHITECTURE.md, 'Worker sessions'): it gives every job it holds
up the moment it cannot prove its session, claims nothing until a new session opens, and the
jobs come back as lost runs, their attempts not spent, each running once more and never twice
at once; a live worker, even one whose loop is stalled, is never found dead.

The keeper's timing is tested on elapsed time stepped by hand (`ManualElapsed`) against a
fake store; the rest on real stores, where a test cuts a session as a terminated connection
would (the next beat answers that the session ended), and, on PostgreSQL, terminates the
session's connection for real."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import BackoffPolicy, JobState, PythonTarget, RunOutcome, Tenant
from recoup.jobs.processes import this_process
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.worker.sessions import SessionKeeper
from recoup.jobs.worker_records import Beat, SessionRules
from tests.jobs.support import SECRET
from tests.support import DEADLINE, ManualElapsed, eventually, wait_until

OPEN = SsrfGuard(allow_private=True)
START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
ONCE = BackoffPolicy(max_attempts=1)
STRICT = SessionRules(grace=timedelta(0), dead_after=timedelta(0))
FAST = {"session_beat": timedelta(seconds=0.1), "dead_check_interval": timedelta(seconds=0.05)}


# 1. The keeper, on elapsed time stepped by hand


class FakeSession:
    def __init__(self, store: FakeStore) -> None:
        self.store = store
        self.expires_after = timedelta(seconds=2.5)
        self.dropped = threading.Event()

    def beat(self) -> Beat:
        self.store.beats += 1
        if self.store.answer == "fail":
            raise ConnectionError("the database does not answer")
        return self.store.answer

    def hand_back(self, *, now: Any) -> list[str]:
        self.store.handed_back += 1
        return []

    def close(self) -> None:
        pass

    def drop(self) -> None:
        self.dropped.set()


class FakeStore:
    """Worker sessions and nothing else; `answer` scripts the beats: a `Beat`, or "fail"."""

    def __init__(self) -> None:
        self.answer: Any = Beat.ALIVE
        self.beats = 0
        self.handed_back = 0
        self.refuse = False  # opening answers that another session holds the id
        self.replacing: list[bool] = []
        self.sessions: list[FakeSession] = []

    def open_worker_session(self, worker: Any, *, now: Any, rules: Any, replacing: bool) -> Any:
        self.replacing.append(replacing)
        if self.refuse:
            return None
        self.sessions.append(FakeSession(self))
        return self.sessions[-1]


class SpyLedger:
    def __init__(self) -> None:
        self.abandoned = 0

    def abandon(self) -> int:
        self.abandoned += 1
        return 3


def keeper_for(
    store: FakeStore, elapsed: ManualElapsed
) -> tuple[SessionKeeper, SpyLedger, list[str]]:
    ledger = SpyLedger()
    calls: list[str] = []

    async def flush() -> None:
        calls.append("flush")

    keeper = SessionKeeper(
        store=store,  # type: ignore[arg-type]
        worker=this_process("w"),
        rules=SessionRules(grace=timedelta(seconds=2.5), dead_after=timedelta(seconds=5)),
        ledger=ledger,  # type: ignore[arg-type]
        flush=flush,
        now=lambda: START,
        elapsed=elapsed,
        every=0.5,
        margin=1.0,
        opened=lambda: calls.append("opened"),
    )
    return keeper, ledger, calls


async def running(keeper: SessionKeeper, elapsed: ManualElapsed) -> asyncio.Task[None]:
    """Start the keeper and its beats; return once it sleeps until the first beat."""
    await keeper.start()
    armed = elapsed.armed
    task = asyncio.create_task(keeper.run())
    assert await eventually(lambda: elapsed.armed > armed)
    return task


async def beat(store: FakeStore, elapsed: ManualElapsed) -> None:
    """Step to the next beat (half a second) and wait until it was tried and the keeper
    sleeps again."""
    beats, armed = store.beats, elapsed.armed
    elapsed.advance(0.5)
    assert await eventually(lambda: store.beats > beats and elapsed.armed > armed)


async def stopped(keeper: SessionKeeper, task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await keeper.close()


def test_without_a_good_beat_the_keeper_gives_everything_up_before_the_session_may_expire() -> None:
    store, elapsed = FakeStore(), ManualElapsed()
    keeper, ledger, calls = keeper_for(store, elapsed)

    async def scenario() -> None:
        task = await running(keeper, elapsed)
        assert keeper.up and keeper.gate() == 0 and calls == ["opened"]
        store.answer = "fail"  # failing beats prove nothing either way, until...
        await beat(store, elapsed)
        await beat(store, elapsed)
        elapsed.advance(0.49)  # 1.49 s since the last good beat began (at 0)
        assert keeper.up and ledger.abandoned == 0
        # ...expires_after (2.5 s) less the margin (1 s) have passed: observers may find it
        # dead a second from now, so it gives everything up now and claims nothing.
        store.answer = Beat.ALIVE
        elapsed.advance(0.01)
        assert not keeper.up and keeper.gate() is None and ledger.abandoned == 1
        assert await eventually(store.sessions[0].dropped.is_set)
        # Its next turn opens a new session, replacing its own, which hands the given-up jobs
        # back after the completions of attempts that ended before were written.
        assert await eventually(lambda: keeper.up)
        assert store.replacing == [False, True] and store.handed_back == 1
        assert calls == ["opened", "flush", "opened"]
        assert keeper.gate() == 1  # a claim made before the jobs were given up is stale
        await stopped(keeper, task)

    asyncio.run(scenario())


def test_a_beat_that_finds_the_session_gone_gives_everything_up_at_once() -> None:
    store, elapsed = FakeStore(), ManualElapsed()
    keeper, ledger, _ = keeper_for(store, elapsed)

    async def scenario() -> None:
        task = await running(keeper, elapsed)
        store.answer = Beat.GONE
        await beat(store, elapsed)
        assert ledger.abandoned == 1 and not keeper.up
        assert elapsed.monotonic() == 0.5  # the first beat, long before any watchdog
        store.answer = Beat.ALIVE
        elapsed.advance(0.5)
        assert await eventually(lambda: keeper.up)
        assert store.handed_back == 1
        await stopped(keeper, task)

    asyncio.run(scenario())


def test_a_lost_connection_opened_again_in_time_keeps_the_jobs_running() -> None:
    store, elapsed = FakeStore(), ManualElapsed()
    keeper, ledger, _ = keeper_for(store, elapsed)

    async def scenario() -> None:
        task = await running(keeper, elapsed)
        store.answer = Beat.LOST  # e.g. pg_terminate_backend of the session's connection
        await beat(store, elapsed)
        # A new session at once, before anyone may act on its jobs: it keeps them.
        assert await eventually(lambda: keeper.up)
        assert store.replacing == [False, True] and store.handed_back == 0
        assert ledger.abandoned == 0 and keeper.gate() == 0
        store.answer = Beat.ALIVE
        for _ in range(6):  # the new session's beats hold it
            await beat(store, elapsed)
        assert keeper.up and ledger.abandoned == 0
        await stopped(keeper, task)

    asyncio.run(scenario())


def test_a_lost_connection_not_opened_again_in_time_gives_everything_up() -> None:
    store, elapsed = FakeStore(), ManualElapsed()
    keeper, ledger, _ = keeper_for(store, elapsed)

    async def scenario() -> None:
        task = await running(keeper, elapsed)
        store.answer, store.refuse = Beat.LOST, True  # the lock is not free again yet
        await beat(store, elapsed)  # at 0.5 s: lost; opening again is refused
        assert not keeper.up and ledger.abandoned == 0  # claims wait; the jobs run on
        armed = elapsed.armed
        elapsed.advance(0.5)  # at 1.0 s: refused again
        assert await eventually(lambda: len(store.replacing) == 3 and elapsed.armed > armed)
        elapsed.advance(0.5)  # 1.5 s since the last good beat began: too late to keep them
        assert ledger.abandoned == 1 and keeper.gate() is None
        store.refuse = False
        assert await eventually(lambda: keeper.up)
        assert store.handed_back == 1 and keeper.gate() == 1
        await stopped(keeper, task)

    asyncio.run(scenario())


def test_good_beats_keep_the_session_however_long_it_runs() -> None:
    store, elapsed = FakeStore(), ManualElapsed()
    keeper, ledger, _ = keeper_for(store, elapsed)

    async def scenario() -> None:
        task = await running(keeper, elapsed)
        for _ in range(40):  # 20 s of elapsed time
            await beat(store, elapsed)
        assert keeper.up and keeper.gate() == 0 and ledger.abandoned == 0
        assert store.replacing == [False]
        await stopped(keeper, task)

    asyncio.run(scenario())


# 2. Real stores, sessions cut by the test


class Cuttable:
    """`store` whose worker sessions the test can cut (the next beat finds the registration
    gone, as when the worker was found dead) and whose re-openings it can hold back; counts
    claims and dead-worker checks (the main loop's turns)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.cut = threading.Event()
        self.reopen = threading.Event()
        self.reopen.set()
        self.opened: list[str] = []  # the worker id of each opening
        self.held_back = threading.Event()  # an opening waits for `reopen`
        self.claims = 0
        self.dead_checks = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def open_worker_session(self, worker: Any, **options: Any) -> Any:
        if worker.id in self.opened:
            self.held_back.set()
            assert self.reopen.wait(DEADLINE)
        self.opened.append(worker.id)
        session = self.store.open_worker_session(worker, **options)
        return None if session is None else CutSession(session, self.cut)

    def claim_due(self, params: Any) -> Any:
        self.claims += 1
        return self.store.claim_due(params)

    def rescue_dead_workers(self, **options: Any) -> Any:
        self.dead_checks += 1
        return self.store.rescue_dead_workers(**options)


class CutSession:
    def __init__(self, session: Any, cut: threading.Event) -> None:
        self.session = session
        self.cut = cut
        self.expires_after = session.expires_after

    def beat(self) -> Beat:
        if self.cut.is_set():
            self.cut.clear()
            return Beat.GONE
        result: Beat = self.session.beat()
        return result

    def hand_back(self, *, now: Any) -> list[str]:
        result: list[str] = self.session.hand_back(now=now)
        return result

    def close(self) -> None:
        self.session.close()

    def drop(self) -> None:
        self.session.drop()


def interruptible(events: list[str]) -> HandlerRegistry:
    """'work': its first attempt runs until interrupted, later ones end at once."""
    registry = HandlerRegistry()

    @registry.register("work")
    async def work(ctx: HandlerContext) -> None:
        events.append(f"start {ctx.attempt}")
        if ctx.attempt == 1:
            try:
                await asyncio.sleep(DEADLINE)
            except asyncio.CancelledError:
                events.append(f"interrupted {ctx.attempt}")
                raise
        events.append(f"end {ctx.attempt}")

    return registry


def test_a_worker_whose_session_ends_gives_its_job_up_and_it_runs_once_more(
    jobstore: Any,
) -> None:
    events: list[str] = []
    store = Cuttable(jobstore)
    scheduler = Scheduler(store, ssrf=OPEN)
    with scheduler.running_worker(handlers=interruptible(events), **FAST) as worker:
        job = scheduler.enqueue(PythonTarget(handler="work"), retry=ONCE)
        assert wait_until(lambda: events == ["start 1"])
        store.cut.set()
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED)
    # Given up (interrupted) before it was handed back and claimed again: never twice at once.
    assert events == ["start 1", "interrupted 1", "start 2", "end 2"]
    runs = [(r.attempt, r.outcome) for r in scheduler.runs(job.id)]
    assert runs == [(1, RunOutcome.LOST), (2, RunOutcome.SUCCEEDED)]
    assert scheduler.get(job.id).retry.max_attempts == 2  # the lost attempt was not spent
    assert worker.stats.abandoned == 1
    assert jobstore.workers() == []  # the stopped worker's registration went with it


def test_a_worker_claims_nothing_while_its_session_is_down(jobstore: Any) -> None:
    ran: list[int] = []
    registry = HandlerRegistry()
    registry.add("noop", lambda ctx: ran.append(ctx.attempt), inline=True)
    store = Cuttable(jobstore)
    scheduler = Scheduler(store, ssrf=OPEN)
    with scheduler.running_worker(handlers=registry, **FAST):
        store.reopen.clear()
        store.cut.set()
        assert store.held_back.wait(DEADLINE)  # given up; opening again is held back
        claims, turns = store.claims, store.dead_checks
        job = scheduler.enqueue(PythonTarget(handler="noop"))
        assert wait_until(lambda: store.dead_checks >= turns + 5)  # the loop goes on turning
        assert store.claims == claims and ran == []
        assert scheduler.get(job.id).state is JobState.SCHEDULED
        store.reopen.set()
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED)
    assert ran == [1]


def test_a_live_worker_whose_loop_is_stalled_is_never_found_dead(jobstore: Any) -> None:
    inside, go = threading.Event(), threading.Event()
    registry = HandlerRegistry()

    def stall(ctx: HandlerContext) -> None:
        inside.set()
        assert go.wait(DEADLINE)  # blocks the worker's event loop: no heartbeat meanwhile

    registry.add("stall", stall, inline=True)
    scheduler = Scheduler(jobstore, ssrf=OPEN)
    with scheduler.running_worker(handlers=registry) as worker:
        job = scheduler.enqueue(PythonTarget(handler="stall"))
        assert inside.wait(DEADLINE)
        # The strictest observer (any heartbeat is too old) still finds its session alive.
        assert jobstore.rescue_dead_workers(now=scheduler.clock.now(), rules=STRICT) == {}
        assert scheduler.get(job.id).state is JobState.RUNNING
        go.set()
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED)
    assert [(r.attempt, r.outcome) for r in scheduler.runs(job.id)] == [(1, RunOutcome.SUCCEEDED)]
    assert worker.stats.abandoned == 0


# 3. PostgreSQL: the session's connection terminated for real


@pytest.fixture
def pg_jobstore(postgres_url: str) -> Iterator[Any]:
    import psycopg

    from recoup.storage.postgres.store import PostgresStore

    schema = f"test_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(postgres_url, schema=schema)
    store.ensure_tenant(
        Tenant(id="default", name="Default", signing_secret=SECRET, created_at=START)
    )
    yield store
    store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def terminate_session(postgres_url: str, worker_id: str) -> None:
    """pg_terminate_backend of the worker's session connection (waiting until it ended)."""
    import psycopg

    from recoup.storage.postgres.workers import APPLICATION_NAME

    with psycopg.connect(postgres_url, autocommit=True) as admin:
        (terminated,) = admin.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (APPLICATION_NAME.format(id=worker_id),),
        ).fetchone()
    assert terminated is True


@pytest.mark.postgres
def test_postgres_a_terminated_session_connected_again_in_time_keeps_its_job(
    pg_jobstore: Any, postgres_url: str
) -> None:
    go = threading.Event()
    registry = HandlerRegistry()

    @registry.register("wait")
    async def wait(ctx: HandlerContext) -> None:
        while not go.is_set():
            await asyncio.sleep(0.01)

    store = Cuttable(pg_jobstore)
    scheduler = Scheduler(store, ssrf=OPEN)
    with scheduler.running_worker(handlers=registry, worker_id="cut-off", **FAST) as worker:
        job = scheduler.enqueue(PythonTarget(handler="wait"), retry=ONCE)
        assert wait_until(lambda: worker.stats.started == 1)
        terminate_session(postgres_url, "cut-off")
        assert wait_until(lambda: store.opened.count("cut-off") >= 2)  # it connected again...
        assert wait_until(lambda: {w.id for w in pg_jobstore.workers()} == {"cut-off"})
        go.set()  # ...and its attempt, never interrupted, ends
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED)
    assert [(r.attempt, r.outcome) for r in scheduler.runs(job.id)] == [(1, RunOutcome.SUCCEEDED)]
    assert worker.stats.abandoned == 0


@pytest.mark.postgres
def test_postgres_a_terminated_session_not_connected_again_in_time_hands_its_job_back_once(
    pg_jobstore: Any, postgres_url: str
) -> None:
    events: list[str] = []
    registry = interruptible(events)
    store = Cuttable(pg_jobstore)
    scheduler = Scheduler(store, ssrf=OPEN)
    with scheduler.running_worker(handlers=registry, worker_id="cut-off", **FAST) as worker:
        job = scheduler.enqueue(PythonTarget(handler="work"), retry=ONCE)
        assert wait_until(lambda: events == ["start 1"])
        store.reopen.clear()  # it cannot connect again before its watchdog gives the job up
        # Another worker watches for dead ones meanwhile: whoever hands the job back, once.
        with scheduler.running_worker(handlers=registry, worker_id="observer", **FAST):
            terminate_session(postgres_url, "cut-off")
            assert wait_until(lambda: events[-1:] == ["interrupted 1"])
            store.reopen.set()
            assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED)
    assert events == ["start 1", "interrupted 1", "start 2", "end 2"]
    runs = [(r.attempt, r.outcome) for r in scheduler.runs(job.id)]
    assert runs == [(1, RunOutcome.LOST), (2, RunOutcome.SUCCEEDED)]
    assert worker.stats.abandoned == 1
