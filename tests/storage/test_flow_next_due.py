"""`next_due_at` with flow keys (ARCHITECTURE.md, 'Flow control'), on both backends: the
instant found by walking one row per key (`_flow_heads`) is the one the GROUP BY of every
scheduled flow job gave, on states the store's own claims and completions make; and on
PostgreSQL the rows it reads do not grow with the keys' backlogs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.jobs.model import Completion, Run, RunOutcome, new_id
from recoup.tenancy import new_tenant
from tests.storage.conftest import Backend, Store, only_on
from tests.storage.test_store_contract import SECOND, T0, claim, job

# The statement `next_due_at` was before the walk, in SQL both backends read alike (SQLite
# takes `NOT held` of its 0/1 column): every scheduled flow job grouped by key, per call.
GROUPED_NEXT_DUE_AT = """
SELECT min(run_at) FROM (
    SELECT * FROM (
        SELECT run_at FROM jobs
        WHERE state = 'scheduled' AND NOT held AND flow_key IS NULL
          AND tenant NOT IN (SELECT id FROM tenants WHERE disabled_at IS NOT NULL)
        ORDER BY run_at
        LIMIT 1
    ) AS plain
    UNION ALL
    SELECT CASE WHEN f.next_start_at > h.head_at THEN f.next_start_at ELSE h.head_at END
    FROM (
        SELECT g.tenant, g.flow_key, max(g.flow_parallelism) AS parallelism,
               (SELECT x.run_at FROM jobs x
                WHERE x.tenant = g.tenant AND x.flow_key = g.flow_key AND x.state = 'scheduled'
                  AND NOT x.held AND x.flow_key IS NOT NULL
                ORDER BY coalesce(x.flow_order_at, x.run_at), x.created_at, x.id
                LIMIT 1) AS head_at
        FROM jobs g
        WHERE state = 'scheduled' AND NOT held AND flow_key IS NOT NULL
          AND tenant NOT IN (SELECT id FROM tenants WHERE disabled_at IS NOT NULL)
        GROUP BY tenant, flow_key
    ) AS h
    LEFT JOIN flow_keys f ON f.tenant = h.tenant AND f.flow_key = h.flow_key
    WHERE h.parallelism IS NULL
       OR (SELECT count(*) FROM jobs r
           WHERE r.tenant = h.tenant AND r.flow_key = h.flow_key AND r.state = 'running')
          < h.parallelism
) AS due
"""


def grouped_next_due_at(store: Store) -> datetime | None:
    dialect = store.dialect  # type: ignore[attr-defined]
    with dialect.read() as conn:
        row = conn.execute(GROUPED_NEXT_DUE_AT).fetchone()
    return None if row is None or row[0] is None else dialect.decode_instant(row[0])


@dataclass(frozen=True)
class Key:
    """One key's limits (the same on each of its jobs) and its jobs' due offsets (seconds)."""

    tenant: int  # 0 or 1
    rate: int | None
    period_s: int
    parallelism: int | None
    ordering: bool  # an ordering key: parallelism 1, its place kept through retries
    due: list[int]


keys = st.builds(
    Key,
    tenant=st.integers(0, 1),
    rate=st.none() | st.integers(1, 3),
    period_s=st.sampled_from([1, 10]),
    parallelism=st.none() | st.integers(1, 3),
    ordering=st.booleans(),
    due=st.lists(st.integers(0, 20), min_size=1, max_size=5),
)
# A claim: its now (seconds after T0), horizon (seconds), room; then, per job it took, what
# becomes of it: left running, succeeded, or a retry so many seconds later.
claims = st.tuples(
    st.integers(0, 20),
    st.integers(0, 5),
    st.integers(1, 6),
    st.lists(st.sampled_from(["running", "succeeded", "retry 3", "retry 30"]), max_size=6),
)


def _new_jobs(key: Key, name: str, tenant: str, group: str) -> list[Any]:
    if key.ordering:
        fields: dict[str, Any] = {"ordering_key": name, "flow_rate": key.rate}
    else:
        rate, parallelism = key.rate, key.parallelism
        if rate is None and parallelism is None:
            parallelism = 1
        fields = {"flow_key": name, "flow_rate": rate, "flow_parallelism": parallelism}
    if key.rate is not None:
        fields["flow_period"] = key.period_s * SECOND
    return [
        job(tenant=tenant, group=group, run_at=T0 + offset * SECOND, **fields) for offset in key.due
    ]


def _settle(store: Store, taken: Any, fate: str, now: datetime) -> None:
    if fate == "running":
        return
    retry_at = None
    if fate.startswith("retry"):
        retry_at = now + int(fate.split()[1]) * SECOND
    run = Run(
        job_id=taken.id,
        tenant=taken.tenant,
        attempt=taken.attempts,
        started_at=now,
        finished_at=now,
        outcome=RunOutcome.RETRY if retry_at is not None else RunOutcome.SUCCEEDED,
    )
    completion = Completion(run=run, worker_id="w1", retry_at=retry_at)
    store.complete_many([completion], now=now)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flow=st.lists(keys, min_size=1, max_size=5),
    plain=st.lists(st.integers(0, 30), max_size=2),
    steps=st.lists(claims, max_size=4),
    disable_second=st.booleans(),
)
def test_the_walk_finds_the_instant_the_grouped_scan_found(
    store: Store,
    flow: list[Key],
    plain: list[int],
    steps: list[tuple[int, int, int, list[str]]],
    disable_second: bool,
) -> None:
    # Each example has tenants of its own, and cancels its jobs at the end: what earlier
    # examples left does not move the instant (next_due_at is over every tenant).
    tenants = [f"t-{new_id()}" for _ in range(2)]
    for tenant in tenants:
        store.ensure_tenant(new_tenant(tenant, now=T0))
    group = f"g-{new_id()}"
    new = [job(tenant=tenants[0], group=group, run_at=T0 + at * SECOND) for at in plain]
    for n, key in enumerate(flow):
        new += _new_jobs(key, f"k{n}", tenants[key.tenant], group)
    store.insert_many(new, now=T0)
    try:
        assert store.next_due_at() == grouped_next_due_at(store)
        for at, horizon, limit, fates in steps:
            now = T0 + at * SECOND
            taken = claim(store, now=now, horizon=horizon * SECOND, limit=limit)
            for claimed, fate in zip(taken, fates, strict=False):
                _settle(store, claimed, fate, now)
            assert store.next_due_at() == grouped_next_due_at(store)
        if disable_second:
            store.set_tenant_disabled(tenants[1], disabled=True, now=T0)
            assert store.next_due_at() == grouped_next_due_at(store)
    finally:
        for tenant in tenants:
            store.set_tenant_disabled(tenant, disabled=False, now=T0)
            store.cancel_group(tenant, group, now=T0)
    assert store.next_due_at() is None


def test_a_key_at_its_next_jobs_parallelism_is_not_due_whatever_its_later_jobs_carry(
    store: Store,
) -> None:
    # A key's limits are its next job's, for the claim and for the wake-up alike: with its
    # one place taken, a key whose later job carries a wider parallelism is not due (the
    # grouped scan took the widest, found it due, and a worker that claimed nothing of it
    # woke again at once).
    store.insert_many(
        [job(flow_key="k", flow_parallelism=1), job(flow_key="k", flow_parallelism=1)], now=T0
    )
    store.insert(job(flow_key="k", flow_parallelism=5), now=T0 + SECOND)
    (running,) = claim(store, now=T0, limit=10)
    assert claim(store, now=T0 + SECOND, limit=10) == []
    assert store.next_due_at() is None
    _settle(store, running, "succeeded", T0 + SECOND)
    assert store.next_due_at() == T0


def _rows_read(plan: dict[str, Any]) -> int:
    """Rows the plan's scans of `jobs` handed up, over all their loops."""
    own = 0
    if plan.get("Relation Name") == "jobs":
        own = plan["Actual Rows"] * plan["Actual Loops"]
    return own + sum(_rows_read(child) for child in plan.get("Plans", []))


@only_on("postgres")
def test_the_walk_reads_one_row_per_key_however_long_their_backlogs(backend: Backend) -> None:
    import psycopg

    store = backend.open()
    read: dict[int, int] = {}
    for per_key in (1, 25):
        tenant = f"t-{new_id()}"
        store.ensure_tenant(new_tenant(tenant, now=T0))
        store.insert_many(
            [
                job(tenant=tenant, group="g", flow_key=f"k{n}", flow_rate=1)
                for n in range(20)
                for _ in range(per_key)
            ],
            now=T0,
        )
        with psycopg.connect(backend.url, options=f"-c search_path={backend.schema}") as pg:
            explained = pg.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + backend.queries["next_due_at"]
            ).fetchone()
            grouped = pg.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + GROUPED_NEXT_DUE_AT)
            grouped_plan = grouped.fetchone()
        assert explained is not None and grouped_plan is not None
        read[per_key] = _rows_read(explained[0][0]["Plan"])
        # The grouped scan read every scheduled flow job: what the walk does not.
        assert _rows_read(grouped_plan[0][0]["Plan"]) >= 20 * per_key
        assert store.next_due_at() == T0
        store.cancel_group(tenant, "g", now=T0)
    assert read[1] == read[25] <= 20 + 1
