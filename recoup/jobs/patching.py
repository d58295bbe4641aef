"""Changing a job that has not started and a schedule's definition, for `Scheduler.update_job`
and `Scheduler.update_schedule` (the rules are `recoup.jobs.changes`'; the store makes each
one transaction).

A schedule's next occurrence after a change: when the change moves occurrences (its rule, its
window, pausing or resuming), the first occurrence after now inside the new window, as resuming
gives; otherwise the schedule keeps its place, except that the jobs it had materialised ahead
(not started, occurrences after now) are replaced: the store deletes them and the next
occurrence goes back to the first after now, so that they are materialised again from the new
definition (target, retry, metadata, …).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING

from recoup.errors import Conflict, InvalidInput, NotFound
from recoup.jobs.changes import JobChange, ScheduleChange, changed_schedule
from recoup.jobs.model import Job, check_one_off_name
from recoup.jobs.schedule_model import Schedule
from recoup.jobs.schedules import (
    SCHEDULE_HORIZON,
    materialise_one,
    next_in_window,
    validate_rule,
    validate_schedule_name,
)

if TYPE_CHECKING:
    from recoup.jobs.scheduler import Scheduler

MAX_REVISION_RETRIES = 5  # concurrent changes of one schedule met before giving up


class JobStarted(Conflict):
    """A PATCH of a job that has started or ended: `job` is the job as it is."""

    def __init__(self, job: Job) -> None:
        if job.state.is_final:
            said = f"has ended ({job.state.value})"
        elif job.attempts:
            said = f"has started ({job.state.value}, attempt {job.attempts})"
        else:
            said = f"has started ({job.state.value})"
        super().__init__(
            f"job {job.id!r} {said}; only a scheduled job that has not started can change"
        )
        self.job = job


def update_job(scheduler: Scheduler, job_id: str, change: JobChange, *, tenant: str) -> Job:
    """Apply `change` to a job that has not started; `JobStarted` if it has (or has ended),
    `NotFound` if absent. A new target passes `Scheduler.check_target` (the SSRF guard) first;
    a new name the checks of a new job's."""
    if isinstance(change.name, str):
        if not 1 <= len(change.name) <= 200:
            raise InvalidInput("name", change.name, "expected 1–200 characters")
    current = scheduler.get(job_id, tenant=tenant)
    if isinstance(change.name, str) and current.schedule_id is None:
        check_one_off_name(change.name)
    if change.target is not None:
        scheduler.check_target(change.target, payload=current.payload)
    found = scheduler.store.update_scheduled_job(tenant, job_id, change, now=scheduler.clock.now())
    if found.job is None:
        raise NotFound(f"no job {job_id!r}")
    if not found.changed:
        raise JobStarted(found.job)
    scheduler.poke_workers()
    return found.job


def next_fire(
    schedule: Schedule, change: ScheduleChange, *, before: Schedule, now: datetime
) -> datetime | None:
    """The next occurrence of the changed `schedule` (see the module's docstring)."""
    kept = before.next_fire_at
    if not change.moves_occurrences and kept is not None and kept <= now:
        return kept  # behind (nothing materialised past now): its missed policy still applies
    return next_in_window(schedule.rule, now, schedule.start_at, schedule.end_at)


def update_schedule(
    scheduler: Scheduler, schedule_id: str, change: ScheduleChange, *, tenant: str
) -> Schedule:
    """Apply `change` to a live schedule (`NotFound` if absent or deleted); the next
    occurrence recomputed and the jobs materialised ahead replaced (module docstring)."""
    if change.name is not None:
        validate_schedule_name(change.name)
    if change.rule is not None:
        change = dataclasses.replace(change, rule=validate_rule(change.rule))
    if change.target is not None:
        scheduler.check_target(change.target)
    for _ in range(MAX_REVISION_RETRIES):
        current = scheduler.get_schedule(schedule_id, tenant=tenant)
        if current.deleted:
            raise NotFound(f"no schedule {schedule_id!r}")
        now = scheduler.clock.now()
        new = changed_schedule(current, change)
        new = dataclasses.replace(new, next_fire_at=next_fire(new, change, before=current, now=now))
        stored = scheduler.store.replace_schedule(new, expected_revision=current.revision, now=now)
        if stored is None:
            continue  # changed (or deleted) meanwhile: read it again
        if stored.next_fire_at is not None and stored.next_fire_at <= now + SCHEDULE_HORIZON:
            materialise_one(scheduler.store, stored, now=now)
        scheduler.poke_workers()
        return scheduler.get_schedule(schedule_id, tenant=tenant)
    raise Conflict(f"schedule {schedule_id!r} kept changing; try again")


__all__ = ["JobStarted", "update_job", "update_schedule"]
