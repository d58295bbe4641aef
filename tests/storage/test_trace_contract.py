"""A job's trace context is stored and read back by every path that writes or returns jobs, on
both backends: one insert, a few rows (one statement) and a batch (PostgreSQL's COPY), claims;
a schedule's, by every path that writes or returns schedules, and given to its occurrences."""

from __future__ import annotations

from dataclasses import replace

import pytest

from recoup.jobs.schedules.occurrences import plan_advance
from recoup.jobs.store import ScheduleFilter
from recoup.jobs.trace_context import TraceContext
from tests.storage.conftest import Store
from tests.storage.test_store_contract import T0, claim, job, schedule

TRACE = TraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "rojo=1")


def test_one_insert_keeps_the_trace_context(store: Store) -> None:
    traced = store.insert(job(trace=TRACE), now=T0)
    plain = store.insert(job(), now=T0)
    assert (traced.trace, plain.trace) == (TRACE, None)
    assert store.get(traced.tenant, traced.id).trace == TRACE  # type: ignore[union-attr]
    assert {j.id: j.trace for j in claim(store)} == {traced.id: TRACE, plain.id: None}


@pytest.mark.parametrize("rows", [3, 40])  # one statement, then the COPY of a batch
def test_a_batch_keeps_each_jobs_trace_context(store: Store, rows: int) -> None:
    jobs = [job(trace=TRACE if n % 2 else None) for n in range(rows)]
    assert store.insert_many(jobs, now=T0) == rows
    found = {j.id: j.trace for j in claim(store)}
    assert found == {j.id: j.trace for j in jobs}


def test_a_schedule_keeps_its_trace_context_and_gives_it_to_its_occurrences(
    store: Store,
) -> None:
    traced = store.insert_schedule(schedule(trace=TRACE), next_fire_at=T0, now=T0)
    plain = store.insert_schedule(schedule(name="plain"), next_fire_at=T0, now=T0)
    assert (traced.trace, plain.trace) == (TRACE, None)
    assert store.get_schedule("default", traced.id).trace == TRACE  # type: ignore[union-attr]
    listed = store.list_schedules(ScheduleFilter(tenant="default")).schedules
    assert {s.id: s.trace for s in listed} == {traced.id: TRACE, plain.id: None}
    # A change of its definition keeps it (the creating request's, not the change's).
    changed = store.replace_schedule(
        replace(traced, name="renamed"), expected_revision=traced.revision, now=T0
    )
    assert changed is not None and changed.trace == TRACE
    plan = plan_advance(changed, now=T0)
    assert plan is not None and plan.jobs
    assert store.advance_schedule(
        changed.id,
        expected_next=T0,
        revision=changed.revision,
        new_next=plan.new_next,
        jobs=plan.jobs,
        now=T0,
    )
    assert {j.trace for j in claim(store)} == {TRACE}
