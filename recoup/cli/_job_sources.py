"""The jobs and schedules `recoup jobs …` and `recoup schedules …` act on, in one shape
wherever they are: a database's, through the `Scheduler`, or a remote server's, through the
Python client. Both answer in the API's models (`recoup.wire`), so the commands print the
same tables and JSON from either.

Each operation takes the checked values the command parsed; bad input has been refused
before (one line naming the option), and what the scheduler or the server refuses is raised
as it is (the commands' edge turns it into one line)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from recoup.cli._where import Where, opened_client, opened_store
from recoup.errors import NotFound
from recoup.jobs.redrive import FailedFilter
from recoup.wire.schemas import (
    JobOut,
    JobPageOut,
    RunOut,
    RunsOut,
    ScheduleListOut,
    ScheduleOut,
    ScheduleState,
)
from recoup.wire.schemas.redrive import RedriveOut

if TYPE_CHECKING:
    from recoup.client import Client
    from recoup.jobs.model import JobState
    from recoup.jobs.scheduler import Scheduler


@dataclass(frozen=True, kw_only=True)
class JobQuery:
    state: JobState | None = None
    name: str | None = None
    name_prefix: str | None = None
    group: str | None = None
    metadata: Mapping[str, str] | None = None
    limit: int = 50
    cursor: str | None = None


@dataclass(frozen=True, kw_only=True)
class ScheduleQuery:
    state: ScheduleState | None = None
    name: str | None = None
    metadata: Mapping[str, str] | None = None
    limit: int = 50
    cursor: str | None = None


class Jobs(Protocol):
    """One tenant's jobs and schedules, wherever they are."""

    tenant: str

    def list_jobs(self, query: JobQuery) -> JobPageOut: ...
    def get(self, job_id: str) -> JobOut: ...
    def get_by_name(self, name: str) -> JobOut: ...
    def runs(self, job_id: str) -> list[RunOut]: ...
    def list_runs(self, job_id: str, limit: int, cursor: str | None) -> RunsOut: ...
    def cancel(self, job_id: str) -> JobOut: ...
    def cancel_by_name(self, name: str) -> int: ...
    def redrive(self, job_id: str) -> JobOut: ...
    def redrive_failed(self, found: FailedFilter, *, dry_run: bool) -> RedriveOut: ...
    def list_schedules(self, query: ScheduleQuery) -> ScheduleListOut: ...
    def get_schedule(self, schedule_id: str) -> ScheduleOut: ...
    def schedule_named(self, name: str) -> ScheduleOut: ...
    def upcoming(self, schedule: ScheduleOut, count: int) -> list[datetime]: ...
    def set_paused(self, schedule_id: str, paused: bool) -> ScheduleOut: ...


@contextlib.contextmanager
def opened_jobs(place: Where) -> Iterator[Jobs]:
    """The jobs of `place`'s tenant, closed afterwards."""
    if place.remote:
        with opened_client(place) as (client, tenant):
            yield RemoteJobs(client, tenant)
        return
    from recoup.jobs.scheduler import Scheduler
    from recoup.timekeeping.clock import SystemClock

    with opened_store(place) as (store, tenant):
        yield LocalJobs(Scheduler(store, clock=SystemClock()), tenant)


@dataclass
class LocalJobs:
    """A database's jobs, through the scheduler."""

    scheduler: Scheduler
    tenant: str

    def list_jobs(self, query: JobQuery) -> JobPageOut:
        page = self.scheduler.list_jobs(
            tenant=self.tenant,
            state=query.state,
            name=query.name,
            name_prefix=query.name_prefix,
            group=query.group,
            metadata=None if query.metadata is None else dict(query.metadata),
            limit=query.limit,
            cursor=query.cursor,
        )
        return JobPageOut(jobs=[JobOut.of(j) for j in page.jobs], next_cursor=page.next_cursor)

    def get(self, job_id: str) -> JobOut:
        return JobOut.of(self.scheduler.get(job_id, tenant=self.tenant))

    def get_by_name(self, name: str) -> JobOut:
        return JobOut.of(self.scheduler.get_by_name(name, tenant=self.tenant))

    def runs(self, job_id: str) -> list[RunOut]:
        return [RunOut.of(r) for r in self.scheduler.runs(job_id, tenant=self.tenant)]

    def list_runs(self, job_id: str, limit: int, cursor: str | None) -> RunsOut:
        page = self.scheduler.list_runs(job_id, tenant=self.tenant, limit=limit, cursor=cursor)
        return RunsOut(runs=[RunOut.of(r) for r in page.runs], next_cursor=page.next_cursor)

    def cancel(self, job_id: str) -> JobOut:
        return JobOut.of(self.scheduler.cancel(job_id, tenant=self.tenant))

    def cancel_by_name(self, name: str) -> int:
        return self.scheduler.cancel_by_name(name, tenant=self.tenant)

    def redrive(self, job_id: str) -> JobOut:
        return JobOut.of(self.scheduler.redrive(job_id, tenant=self.tenant))

    def redrive_failed(self, found: FailedFilter, *, dry_run: bool) -> RedriveOut:
        import getpass

        who = f"cli:{getpass.getuser()}"
        outcome = self.scheduler.redrive_failed(found, who=who, dry_run=dry_run)
        return RedriveOut.of(outcome, found)

    def list_schedules(self, query: ScheduleQuery) -> ScheduleListOut:
        state = query.state
        page = self.scheduler.list_schedules(
            tenant=self.tenant,
            paused=None
            if state is None or state is ScheduleState.ENDED
            else state is ScheduleState.PAUSED,
            ended=None if state is None else state is ScheduleState.ENDED,
            metadata=None if query.metadata is None else dict(query.metadata),
            name=query.name,
            limit=query.limit,
            cursor=query.cursor,
        )
        schedules = [ScheduleOut.of(s) for s in page.schedules]
        return ScheduleListOut(schedules=schedules, next_cursor=page.next_cursor)

    def get_schedule(self, schedule_id: str) -> ScheduleOut:
        """The live schedule; `NotFound` for a deleted one, as in the API."""
        schedule = self.scheduler.get_schedule(schedule_id, tenant=self.tenant)
        if schedule.deleted:
            raise NotFound(f"no schedule {schedule_id!r}")
        return ScheduleOut.of(schedule)

    def schedule_named(self, name: str) -> ScheduleOut:
        return schedule_named(self, name)

    def upcoming(self, schedule: ScheduleOut, count: int) -> list[datetime]:
        stored = self.scheduler.get_schedule(schedule.id, tenant=self.tenant)
        return self.scheduler.upcoming(stored, count)

    def set_paused(self, schedule_id: str, paused: bool) -> ScheduleOut:
        change = self.scheduler.pause if paused else self.scheduler.resume
        return ScheduleOut.of(change(schedule_id, tenant=self.tenant))


@dataclass
class RemoteJobs:
    """A server's jobs, through its API (the token's tenant)."""

    client: Client
    tenant: str

    def list_jobs(self, query: JobQuery) -> JobPageOut:
        return self.client.list_jobs(
            state=None if query.state is None else query.state.value,
            name=query.name,
            name_prefix=query.name_prefix,
            group=query.group,
            metadata=query.metadata,
            limit=query.limit,
            cursor=query.cursor,
        )

    def get(self, job_id: str) -> JobOut:
        return self.client.get_job(job_id)

    def get_by_name(self, name: str) -> JobOut:
        return job_named(self, name)

    def runs(self, job_id: str) -> list[RunOut]:
        return self.client.runs(job_id)

    def list_runs(self, job_id: str, limit: int, cursor: str | None) -> RunsOut:
        return self.client.list_runs(job_id, limit=limit, cursor=cursor)

    def cancel(self, job_id: str) -> JobOut:
        return self.client.cancel_job(job_id)

    def cancel_by_name(self, name: str) -> int:
        return self.client.cancel_jobs(name=name)

    def redrive(self, job_id: str) -> JobOut:
        return self.client.retry_job(job_id)

    def redrive_failed(self, found: FailedFilter, *, dry_run: bool) -> RedriveOut:
        return self.client.redrive_jobs(
            group=found.group,
            name_prefix=found.name_prefix,
            since=found.since,
            until=found.until,
            error=found.error,
            dry_run=dry_run,
        )

    def list_schedules(self, query: ScheduleQuery) -> ScheduleListOut:
        return self.client.schedules_page(
            state=None if query.state is None else query.state.value,
            name=query.name,
            metadata=query.metadata,
            limit=query.limit,
            cursor=query.cursor,
        )

    def get_schedule(self, schedule_id: str) -> ScheduleOut:
        return self.client.get_schedule(schedule_id)

    def schedule_named(self, name: str) -> ScheduleOut:
        return schedule_named(self, name)

    def upcoming(self, schedule: ScheduleOut, count: int) -> list[datetime]:
        return self.client.upcoming(schedule.id, count)

    def set_paused(self, schedule_id: str, paused: bool) -> ScheduleOut:
        change = self.client.pause_schedule if paused else self.client.resume_schedule
        return change(schedule_id)


def job_named(jobs: Jobs, name: str) -> JobOut:
    """The live job of that name, else the most recent one (as `Scheduler.get_by_name`, which
    a database answers itself), read through the place's list; `NotFound` (exit 2, the line a
    database gives) when none."""
    named = jobs.list_jobs(JobQuery(name=name, limit=100)).jobs  # newest first
    if not named:
        raise NotFound(f"no job named {name!r}")
    live = [j for j in named if not j.state.is_final]
    return live[0] if live else named[0]


def schedule_named(jobs: Jobs, name: str) -> ScheduleOut:
    """The schedule of that name, read through the place's own list; `NotFound` when none."""
    named = jobs.list_schedules(ScheduleQuery(name=name, limit=1)).schedules
    if not named:
        raise NotFound(f"no schedule named {name!r}")
    return named[0]


__all__ = [
    "JobQuery",
    "Jobs",
    "LocalJobs",
    "RemoteJobs",
    "ScheduleQuery",
    "job_named",
    "opened_jobs",
    "schedule_named",
]
