"""Changing a job that has not started, for `Scheduler.update_job` (the rules are
`recoup.jobs.changes`'; the store makes it one transaction). A schedule's changes are
`recoup.jobs.schedules.calls`'."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recoup.errors import Conflict, InvalidInput, NotFound
from recoup.jobs.changes import JobChange, Unset
from recoup.jobs.model import Job, check_one_off_name

if TYPE_CHECKING:
    from recoup.jobs.scheduler import Scheduler


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
    if not isinstance(change.target, Unset):
        scheduler.check_target(change.target, payload=current.payload)
    found = scheduler.store.update_scheduled_job(tenant, job_id, change, now=scheduler.clock.now())
    if found.job is None:
        raise NotFound(f"no job {job_id!r}")
    if not found.changed:
        raise JobStarted(found.job)
    scheduler.poke_workers()
    return found.job


__all__ = ["JobStarted", "update_job"]
