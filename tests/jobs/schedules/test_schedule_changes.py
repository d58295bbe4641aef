"""Changing jobs and schedules through the `Scheduler`, and a schedule's window, run by a
worker on a virtual clock, on each backend."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.errors import InvalidInput, NotFound
from recoup.jobs.changes import JobChange, ScheduleChange
from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import HttpTarget, JobState, PythonTarget
from recoup.jobs.patching import JobStarted
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.schedules.model import CronRule, NewSchedule, ScheduleState
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import ClaimParams
from recoup.jobs.time_travel import TestClock
from recoup.jobs.worker import Worker
from recoup.timekeeping.clock import VirtualClock

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOURLY = CronRule(expression="0 * * * *", timezone="UTC")
CLAIM = ClaimParams(
    worker_id="w", now=START, horizon=timedelta(0), lease=timedelta(minutes=5), limit=3
)


class Harness:
    def __init__(self, store: Any) -> None:
        self.clock = VirtualClock(START)
        self.fired: list[tuple[str, datetime, dict[str, str]]] = []
        registry = HandlerRegistry()
        for name in ("tick", "tock"):
            registry.register(name, inline=True)(self._record(name))
        self.scheduler = Scheduler(store, clock=self.clock, ssrf=SsrfGuard())
        self.worker: Worker = self.scheduler.worker(
            handlers=registry, schedule_horizon=timedelta(hours=1), rng=random.Random(0)
        )

    def _record(self, name: str) -> Any:
        def handler(ctx: HandlerContext) -> None:
            job = self.scheduler.get(ctx.job_id)
            self.fired.append((name, ctx.run_at, job.metadata))

        return handler

    def run_until(self, until: datetime) -> None:
        TestClock(
            self.clock, self.worker, self.worker.store, schedules=self.worker.store
        ).advance_to(until)


@pytest.fixture
def harness(jobstore: Any) -> Harness:
    return Harness(jobstore)


# -- jobs --------------------------------------------------------------------------------------


def test_a_changed_job_runs_with_its_new_values(harness: Harness) -> None:
    scheduler = harness.scheduler
    job = scheduler.enqueue(
        PythonTarget(handler="tick"), delay=timedelta(hours=2), metadata={"order": "o_1"}
    )
    changed = scheduler.update_job(
        job.id,
        JobChange(
            run_at=START + timedelta(minutes=30),
            target=PythonTarget(handler="tock"),
            metadata={"order": None, "note": "moved"},
        ),
    )
    assert changed.metadata == {"note": "moved"}
    harness.run_until(START + timedelta(hours=1))
    assert harness.fired == [("tock", START + timedelta(minutes=30), {"note": "moved"})]
    assert scheduler.get(job.id).state is JobState.SUCCEEDED


def test_a_job_claimed_first_refuses_the_change_naming_its_state(harness: Harness) -> None:
    scheduler = harness.scheduler
    job = scheduler.enqueue(PythonTarget(handler="tick"))
    scheduler.store.claim_due(
        ClaimParams(
            worker_id="w", now=START, horizon=timedelta(0), lease=timedelta(minutes=1), limit=1
        )
    )
    with pytest.raises(JobStarted) as refused:
        scheduler.update_job(job.id, JobChange(name="late"))
    assert "running" in str(refused.value)
    assert refused.value.job.state is JobState.RUNNING
    done = scheduler.enqueue(PythonTarget(handler="tick"))
    scheduler.cancel(done.id)
    with pytest.raises(JobStarted, match=r"has ended \(cancelled\)"):
        scheduler.update_job(done.id, JobChange(name="late"))
    with pytest.raises(NotFound):
        scheduler.update_job("absent", JobChange(name="x"))


def test_a_new_target_passes_the_ssrf_guard_and_a_new_name_the_name_rules(
    harness: Harness,
) -> None:
    scheduler = harness.scheduler
    job = scheduler.enqueue(PythonTarget(handler="tick"), delay=timedelta(hours=1))
    with pytest.raises(InvalidInput):
        scheduler.update_job(job.id, JobChange(target=HttpTarget(url="http://127.0.0.1/x")))
    with pytest.raises(InvalidInput) as refused:
        scheduler.update_job(job.id, JobChange(name="a@b"))
    assert refused.value.field == "name"
    assert scheduler.get(job.id).target == PythonTarget(handler="tick")


def test_a_claim_racing_changes_either_runs_the_changed_job_or_refuses_the_change(
    database: Any, jobstore: Any
) -> None:
    scheduler = Scheduler(jobstore, clock=VirtualClock(START), ssrf=SsrfGuard())
    ids = [scheduler.enqueue(PythonTarget(handler="tick")).id for _ in range(40)]
    other = Scheduler(database.open(), clock=VirtualClock(START), ssrf=SsrfGuard())
    outcome: dict[str, bool] = {}
    claimed: dict[str, str | None] = {}

    def change_all() -> None:
        for job_id in ids:
            try:
                other.update_job(job_id, JobChange(name=f"changed-{job_id}"))
                outcome[job_id] = True
            except JobStarted:
                outcome[job_id] = False

    def claim_all() -> None:
        while len(claimed) < len(ids):
            for job in jobstore.claim_due(
                ClaimParams(
                    worker_id="w",
                    now=START,
                    horizon=timedelta(0),
                    lease=timedelta(minutes=5),
                    limit=3,
                )
            ):
                claimed[job.id] = job.name

    threads = [threading.Thread(target=change_all), threading.Thread(target=claim_all)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert set(outcome) == set(claimed) == set(ids)
    for job_id in ids:
        # Changed before its claim: claimed with the new name. Else refused, and unchanged.
        assert (claimed[job_id] is not None) is outcome[job_id], job_id


# -- schedules ---------------------------------------------------------------------------------


def test_a_schedule_fires_only_inside_its_window_then_ends(harness: Harness) -> None:
    scheduler = harness.scheduler
    start_at = START + timedelta(hours=3)  # 15:00
    end_at = START + timedelta(hours=5)  # 17:00, inclusive
    s = scheduler.create_schedule(
        NewSchedule(
            name="w",
            rule=HOURLY,
            target=PythonTarget(handler="tick"),
            start_at=start_at,
            end_at=end_at,
            metadata={"team": "ops"},
        )
    )
    assert s.next_fire_at == start_at
    assert scheduler.upcoming(s.id, 10) == [start_at, start_at + timedelta(hours=1), end_at]
    harness.run_until(START + timedelta(days=1))
    assert [at for _, at, _ in harness.fired] == [
        start_at,
        start_at + timedelta(hours=1),
        end_at,
    ]
    assert all(meta == {"team": "ops"} for _, _, meta in harness.fired)  # inherited
    after = scheduler.get_schedule(s.id)
    assert after.next_fire_at is None and after.state is ScheduleState.ENDED
    assert [x.id for x in scheduler.list_schedules(ended=True).schedules] == [s.id]
    # Resumed after its end, it stays ended.
    scheduler.pause(s.id)
    assert scheduler.resume(s.id).state is ScheduleState.ENDED


def test_changing_a_schedule_replaces_the_job_it_materialised_ahead(harness: Harness) -> None:
    scheduler = harness.scheduler
    s = scheduler.create_schedule(
        NewSchedule(name="h", rule=HOURLY, target=PythonTarget(handler="tick"))
    )
    scheduler.materialise(horizon=timedelta(hours=1))  # 13:00's job exists already
    ahead = scheduler.list_jobs(schedule_id=s.id).jobs
    assert [j.run_at for j in ahead] == [START + timedelta(hours=1)]
    changed = scheduler.update_schedule(
        s.id,
        ScheduleChange(
            target=PythonTarget(handler="tock"),
            metadata={"v": "2"},
            end_at=START + timedelta(hours=2),
        ),
    )
    assert changed.revision == s.revision + 1
    assert changed.metadata == {"v": "2"}
    assert scheduler.list_jobs(schedule_id=s.id).jobs == []  # the old one is gone, not cancelled
    assert changed.next_fire_at == START + timedelta(hours=1)
    scheduler.materialise(horizon=timedelta(hours=1))  # a worker's next pass
    jobs = scheduler.list_jobs(schedule_id=s.id).jobs
    # One job for 13:00 again, now of the new definition.
    assert [(j.run_at, j.target, j.metadata) for j in jobs] == [
        (START + timedelta(hours=1), PythonTarget(handler="tock"), {"v": "2"})
    ]
    harness.run_until(START + timedelta(hours=6))
    assert [(name, at) for name, at, _ in harness.fired] == [
        ("tock", START + timedelta(hours=1)),
        ("tock", START + timedelta(hours=2)),
    ]
    assert scheduler.get_schedule(s.id).state is ScheduleState.ENDED


def test_a_new_cron_and_zone_move_the_next_occurrence(harness: Harness) -> None:
    scheduler = harness.scheduler
    s = scheduler.create_schedule(
        NewSchedule(name="d", rule=HOURLY, target=PythonTarget(handler="tick"))
    )
    changed = scheduler.update_schedule(
        s.id, ScheduleChange(rule=CronRule(expression="0 9 * * *", timezone="America/New_York"))
    )
    # 09:00 in New York on 2026-03-01 (EST, UTC-5) is 14:00 UTC.
    assert changed.next_fire_at == datetime(2026, 3, 1, 14, 0, tzinfo=UTC)
    with pytest.raises(InvalidInput) as refused:
        scheduler.update_schedule(
            s.id, ScheduleChange(rule=CronRule(expression="61 * * * *", timezone="UTC"))
        )
    assert refused.value.field.startswith("rule")
    with pytest.raises(InvalidInput) as reversed_window:
        scheduler.update_schedule(
            s.id, ScheduleChange(start_at=START + timedelta(days=2), end_at=START)
        )
    assert reversed_window.value.field == "end_at"


def test_pausing_and_unpausing_through_a_change(harness: Harness) -> None:
    scheduler = harness.scheduler
    s = scheduler.create_schedule(
        NewSchedule(name="p", rule=HOURLY, target=PythonTarget(handler="tick"))
    )
    paused = scheduler.update_schedule(s.id, ScheduleChange(paused=True))
    assert paused.state is ScheduleState.PAUSED
    harness.run_until(START + timedelta(hours=3))
    assert harness.fired == []  # the job materialised ahead went with the change
    active = scheduler.update_schedule(s.id, ScheduleChange(paused=False))
    assert active.state is ScheduleState.ACTIVE
    assert active.next_fire_at == START + timedelta(hours=4)
