"""Flow control in the store's claims (`recoup.storage.flow_claims`), on both backends: a
key's rate as start slots, its parallelism against its running jobs, due order within a key,
and other keys (and jobs without one) claimed beside a throttled key. Time is an argument
(`ClaimParams.now`): no clock, no sleeps."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from recoup.jobs.flow import START_TOLERANCE, spacing
from recoup.jobs.model import Completion, Job, Run, RunOutcome
from recoup.jobs.store import ClaimParams
from recoup.storage import flow_claims
from recoup.storage.flow_claims import KEYS_PER_CLAIM
from recoup.tenancy import new_tenant
from tests.storage.conftest import Store
from tests.storage.test_store_contract import LEASE, SECOND, T0, claim, job


def starts_in_any_window(starts: list, period: timedelta) -> int:
    """The most starts in any half-open window [t, t + period)."""
    ordered = sorted(starts)
    most, first = 0, 0
    for last, at in enumerate(ordered):
        while at - ordered[first] >= period:
            first += 1
        most = max(most, last - first + 1)
    return most


def test_a_rate_reserves_spaced_slots_across_claimers_and_never_more_in_a_period(
    store: Store,
) -> None:
    store.insert_many([job(flow_key="k", flow_rate=5) for _ in range(40)], now=T0)
    starts = []
    now = T0
    for turn in range(40):
        taken = claim(store, worker=f"w{turn % 2}", now=now, horizon=SECOND, limit=3)
        starts += [j.run_at for j in taken]
        now += timedelta(milliseconds=250)
    assert len(starts) == len(set(starts)) >= 30
    ordered = sorted(starts)
    step = spacing(5, SECOND)
    assert all(b - a >= step for a, b in itertools.pairwise(ordered))
    # Even if every start were as late as the tolerance allows, 5 a second at most.
    assert starts_in_any_window(starts, SECOND - START_TOLERANCE) <= 5
    assert starts_in_any_window(starts, SECOND) <= 5
    assert all(s <= T0 + 11 * SECOND for s in starts)


def test_jobs_of_other_keys_and_without_a_key_are_claimed_beside_a_throttled_key(
    store: Store,
) -> None:
    store.insert_many([job(flow_key="slow", flow_rate=1) for _ in range(50)], now=T0)
    store.insert_many([job(flow_key="fast", flow_rate=1000) for _ in range(20)], now=T0)
    store.insert_many([job() for _ in range(30)], now=T0)
    taken = claim(store, now=T0, horizon=timedelta(milliseconds=500), limit=100)
    by_key: dict[str | None, int] = {}
    for j in taken:
        by_key[j.flow_key] = by_key.get(j.flow_key, 0) + 1
    assert by_key == {"slow": 1, "fast": 20, None: 30}


def test_parallelism_counts_the_keys_running_jobs_until_they_complete(store: Store) -> None:
    store.insert_many([job(flow_key="p", flow_parallelism=2) for _ in range(5)], now=T0)
    first = claim(store, worker="a", now=T0, limit=10)
    assert len(first) == 2
    assert claim(store, worker="b", now=T0 + SECOND, limit=10) == []
    done = first[0]
    run = Run(
        job_id=done.id,
        tenant=done.tenant,
        attempt=1,
        started_at=T0,
        finished_at=T0 + SECOND,
        outcome=RunOutcome.SUCCEEDED,
    )
    store.complete_many([Completion(run=run, worker_id="a")], now=T0 + SECOND)
    again = claim(store, worker="b", now=T0 + SECOND, limit=10)
    assert len(again) == 1
    assert store.release("a", [first[1].id], now=T0 + SECOND) == 1
    assert len(claim(store, worker="b", now=T0 + SECOND, limit=10)) == 1


def test_a_keys_jobs_are_claimed_in_due_then_creation_order(store: Store) -> None:
    later = job(flow_key="o", flow_parallelism=1, run_at=T0 + SECOND)
    first = job(flow_key="o", flow_parallelism=1)
    second = job(flow_key="o", flow_parallelism=1)
    store.insert(later, now=T0)
    store.insert(first, now=T0)
    store.insert(second, now=T0 + timedelta(microseconds=5))
    seen: list[str] = []
    now = T0 + 2 * SECOND
    for _ in range(3):
        (taken,) = claim(store, now=now, limit=10)
        seen.append(taken.id)
        _succeed(store, taken, now)
    assert seen == [first.id, second.id, later.id]


def test_a_held_back_job_is_scheduled_and_the_next_due_instant_is_the_keys_next_slot(
    store: Store,
) -> None:
    store.insert_many(
        [job(flow_key="r", flow_rate=1, flow_period=10 * SECOND) for _ in range(2)], now=T0
    )
    (taken,) = claim(store, now=T0, horizon=SECOND, limit=10)
    assert taken.run_at == T0
    assert claim(store, now=T0 + SECOND, horizon=SECOND, limit=10) == []
    due = store.next_due_at()
    assert due is not None and due >= T0 + 10 * SECOND


def _succeed(store: Store, taken: Job, now) -> None:
    run = Run(
        job_id=taken.id,
        tenant=taken.tenant,
        attempt=taken.attempts,
        started_at=now,
        finished_at=now,
        outcome=RunOutcome.SUCCEEDED,
    )
    store.complete_many([Completion(run=run, worker_id="w1")], now=now)


def _retry(store: Store, taken: Job, now, retry_at) -> None:
    run = Run(
        job_id=taken.id,
        tenant=taken.tenant,
        attempt=taken.attempts,
        started_at=now,
        finished_at=now,
        outcome=RunOutcome.RETRY,
    )
    store.complete_many([Completion(run=run, worker_id="w1", retry_at=retry_at)], now=now)


def test_an_ordering_key_runs_one_at_a_time_and_a_retrying_job_holds_the_ones_behind(
    store: Store,
) -> None:
    first, second = job(ordering_key="o"), job(ordering_key="o")
    store.insert(first, now=T0)
    store.insert(second, now=T0 + timedelta(microseconds=1))
    (taken,) = claim(store, now=T0, limit=10)
    assert taken.id == first.id and taken.ordering_key == "o" and taken.flow_key is None
    assert claim(store, now=T0, limit=10) == []  # one at a time
    _retry(store, taken, T0, T0 + 10 * SECOND)
    assert claim(store, now=T0 + 5 * SECOND, limit=10) == []  # held behind the retry
    assert store.next_due_at() == T0 + 10 * SECOND
    (again,) = claim(store, now=T0 + 10 * SECOND, limit=10)
    assert again.id == first.id
    _succeed(store, again, T0 + 10 * SECOND)
    (after,) = claim(store, now=T0 + 10 * SECOND, limit=10)
    assert after.id == second.id


def test_an_ordering_key_that_skips_lets_the_next_job_pass_a_retrying_one(store: Store) -> None:
    first = job(ordering_key="s", ordering_skip_failed=True)
    second = job(ordering_key="s", ordering_skip_failed=True)
    store.insert(first, now=T0)
    store.insert(second, now=T0 + timedelta(microseconds=1))
    (taken,) = claim(store, now=T0, limit=10)
    _retry(store, taken, T0, T0 + 10 * SECOND)
    (passed,) = claim(store, now=T0 + SECOND, limit=10)
    assert passed.id == second.id and passed.ordering_skip_failed


def test_keys_a_claim_cannot_serve_yet_leave_room_for_the_others(store: Store) -> None:
    # More throttled keys than one claim serves (KEYS_PER_CLAIM), all due at once: the keys
    # whose next slot is past the horizon, or whose parallelism is full, are passed over, so
    # every key starts its first job within a few claims, not once the first keys drain.
    keys = KEYS_PER_CLAIM + 40
    store.insert_many(
        [job(flow_key=f"r{n}", flow_rate=1, flow_period=timedelta(hours=1)) for n in range(keys)]
        + [job(flow_key=f"r{n}", flow_rate=1, flow_period=timedelta(hours=1)) for n in range(keys)],
        now=T0,
    )
    started: set[str | None] = set()
    for turn in range(3):
        taken = claim(store, now=T0 + turn * SECOND, horizon=SECOND, limit=500)
        assert all(j.flow_key not in started for j in taken)  # one start per key per hour
        started |= {j.flow_key for j in taken}
    assert started == {f"r{n}" for n in range(keys)}

    store.insert_many(
        [job(flow_key=f"p{n}", flow_parallelism=1) for n in range(keys) for _ in range(2)],
        now=T0 + 3 * SECOND,
    )
    running: set[str | None] = set()
    for turn in range(3):
        taken = claim(store, now=T0 + (3 + turn) * SECOND, horizon=SECOND, limit=500)
        assert all(j.flow_key not in running for j in taken)  # one at a time per key
        running |= {j.flow_key for j in taken}
    assert running == {f"p{n}" for n in range(keys)}


def test_a_claim_finds_every_tenants_keys_however_long_their_lines(store: Store) -> None:
    # The claim walks the keys' lines one key at a time (a loose index scan): a long backlog
    # of one key is not read, and the keys after it, in its tenant and the next, are reached.
    for tenant in ("t-a", "t-b", "t-c"):
        store.ensure_tenant(new_tenant(tenant, now=T0))
    store.insert_many(
        [job(tenant="t-a", flow_key="a0", flow_rate=1) for _ in range(300)]
        + [job(tenant=t, flow_key=k, flow_parallelism=1) for t in ("t-a", "t-b") for k in "xy"]
        + [job(tenant="t-c", flow_key="z", flow_rate=1, run_at=T0 + 10 * SECOND)],  # not due
        now=T0,
    )
    taken = claim(store, now=T0, horizon=SECOND, limit=100)
    assert sorted((j.tenant, j.flow_key) for j in taken) == [
        ("t-a", "a0"),
        ("t-a", "x"),
        ("t-a", "y"),
        ("t-b", "x"),
        ("t-b", "y"),
    ]


class _CountingConnection:
    """A claim's connection that counts the rows each named query hands back."""

    def __init__(self, conn: Any, queries: Mapping[str, str], rows: dict[str, int]) -> None:
        self._conn = conn
        self._names = {text: name for name, text in queries.items()}
        self._rows = rows

    def execute(self, query: str, *args: Any, **kwargs: Any) -> Any:
        cursor = self._conn.execute(query, *args, **kwargs)
        name, rows = self._names.get(query, "?"), self._rows

        class Counted:
            def fetchall(self) -> list[Any]:
                found = list(cursor.fetchall())
                rows[name] = rows.get(name, 0) + len(found)
                return found

            def fetchone(self) -> Any:
                found = cursor.fetchone()
                rows[name] = rows.get(name, 0) + (found is not None)
                return found

        return Counted()


@pytest.fixture
def rows_read(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Rows handed to the flow claim by each of its named queries, on either backend."""
    rows: dict[str, int] = {}
    original = flow_claims.claim_flow_jobs

    def counted(conn: Any, queries: Mapping[str, str], *args: Any, **kwargs: Any) -> list[Job]:
        return original(_CountingConnection(conn, queries, rows), queries, *args, **kwargs)

    from recoup.storage.postgres import queue as postgres_queue
    from recoup.storage.sqlite import queue as sqlite_queue

    monkeypatch.setattr(sqlite_queue, "claim_flow_jobs", counted)
    monkeypatch.setattr(postgres_queue, "claim_flow_jobs", counted)
    return rows


def test_a_claim_reads_of_a_throttled_backlog_only_the_jobs_its_horizon_can_start(
    store: Store, rows_read: dict[str, int]
) -> None:
    # 2,000 jobs of a key limited to 20 a second, all due, and a claim of room 1,000 with a
    # horizon of 500 ms: it can start 10 of them (one per 51.25 ms from now), so it reads 10
    # of the key's line, not 1,000 rows that it would leave scheduled (each claim paid that
    # while a backlog waited: plain jobs beside it lost 29% of their throughput on SQLite).
    store.insert_many([job(flow_key="slow", flow_rate=20) for _ in range(2000)], now=T0)
    horizon = timedelta(milliseconds=500)
    taken = claim(store, now=T0, horizon=horizon, limit=1000)
    assert len(taken) == 10
    assert rows_read["flow_due_jobs"] == 10
    # The next claims, 30 ms apart, find one new slot each at most, and read as little.
    rows_read.clear()
    now, more = T0, 0
    for _ in range(10):
        now += timedelta(milliseconds=30)
        more += len(claim(store, now=now, horizon=horizon, limit=1000))
    assert 5 <= more <= 7
    assert rows_read.get("flow_due_jobs", 0) == more


def test_a_claim_reads_of_a_busy_keys_line_no_more_than_its_parallelism_leaves(
    store: Store, rows_read: dict[str, int]
) -> None:
    store.insert_many([job(flow_key="busy", flow_parallelism=3) for _ in range(500)], now=T0)
    assert len(claim(store, now=T0, limit=1000)) == 3
    assert rows_read["flow_due_jobs"] == 3


def test_a_claim_hands_back_the_late_jobs_it_is_given_and_may_reslot_them_at_once(
    store: Store,
) -> None:
    # A worker gives back a rate-limited job that fired too late inside its next claim
    # (`ClaimParams.give_back`): released and, the key allowing, claimed again for a new slot
    # in the same transaction, its attempt not counted twice.
    store.insert_many([job(flow_key="r", flow_rate=2)], now=T0)
    (late,) = claim(store, now=T0, limit=10)
    assert late.run_at == T0
    params = ClaimParams(
        worker_id="w1",
        now=T0 + SECOND,
        horizon=SECOND,
        lease=LEASE,
        limit=10,
        give_back=(late.id,),
    )
    (again,) = store.claim_due(params)
    assert again.id == late.id and again.attempts == 1
    assert again.run_at >= T0 + spacing(2, SECOND)
    # With no room to claim, the claim still hands them back.
    params = ClaimParams(
        worker_id="w1",
        now=T0 + SECOND,
        horizon=SECOND,
        lease=LEASE,
        limit=0,
        give_back=(again.id,),
    )
    assert store.claim_due(params) == []
    back = store.get(again.tenant, again.id)
    assert back is not None and back.state.value == "scheduled" and back.attempts == 0
