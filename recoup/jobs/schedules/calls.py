"""The schedules half of the `Scheduler` Python API (`recoup.jobs.scheduler`): create, read,
list, change, pause, resume, delete a recurring schedule, its next occurrences, and
materialising them.

A schedule's next occurrence after a change (`update_schedule`): when the change moves
occurrences (its rule, its window, pausing or resuming), the first occurrence after now inside
the new window, as resuming gives; otherwise the schedule keeps its place, except that the jobs
it had materialised ahead (not started, occurrences after now) are replaced: the store deletes
them and the next occurrence goes back to the first after now, so that they are materialised
again from the new definition (target, retry, metadata, …). The rules of a change are
`recoup.jobs.changes`'; the store makes each try one compare-and-set on the revision.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from recoup.errors import Conflict, InvalidInput, NotFound
from recoup.jobs.changes import ScheduleChange, Unset, changed_schedule
from recoup.jobs.metadata import check_filter
from recoup.jobs.model import DEFAULT_TENANT, Target
from recoup.jobs.schedules.model import NewSchedule, Schedule
from recoup.jobs.schedules.occurrences import (
    SCHEDULE_HORIZON,
    materialise,
    materialise_one,
    next_in_window,
    upcoming,
    validate_rule,
    validate_schedule_name,
)
from recoup.jobs.store import ScheduleFilter, SchedulePage, SchedulerStore
from recoup.timekeeping.clock import Clock

MAX_REVISION_RETRIES = 5  # concurrent changes of one schedule met before giving up


class ScheduleCalls:
    """Schedules of `store`, on `clock`; the rest comes from `Scheduler`."""

    store: SchedulerStore
    clock: Clock

    def check_target(self, target: Target, *, payload: Any = None) -> Target:
        raise NotImplementedError

    def _ensure_tenant(self, tenant: str) -> None:
        raise NotImplementedError

    def _poke(self) -> None:
        raise NotImplementedError

    def update_schedule(
        self, schedule_id: str, change: ScheduleChange, *, tenant: str = DEFAULT_TENANT
    ) -> Schedule:
        """Apply `change` to a live schedule (`NotFound` if absent or deleted); the next
        occurrence recomputed and the jobs materialised ahead replaced (module docstring)."""
        if not isinstance(change.name, Unset):
            validate_schedule_name(change.name)
        if not isinstance(change.rule, Unset):
            change = dataclasses.replace(change, rule=validate_rule(change.rule))
        if not isinstance(change.target, Unset):
            self.check_target(change.target)
        for _ in range(MAX_REVISION_RETRIES):
            current = self.get_schedule(schedule_id, tenant=tenant)
            if current.deleted:
                raise NotFound(f"no schedule {schedule_id!r}")
            now = self.clock.now()
            new = changed_schedule(current, change)
            new = dataclasses.replace(
                new, next_fire_at=next_fire(new, change, before=current, now=now)
            )
            stored = self.store.replace_schedule(new, expected_revision=current.revision, now=now)
            if stored is None:
                continue  # changed (or deleted) meanwhile: read it again
            if stored.next_fire_at is not None and stored.next_fire_at <= now + SCHEDULE_HORIZON:
                materialise_one(self.store, stored, now=now)
            self._poke()
            return self.get_schedule(schedule_id, tenant=tenant)
        raise Conflict(f"schedule {schedule_id!r} kept changing; try again")

    def create_schedule(self, schedule: NewSchedule, *, existing_ok: bool = False) -> Schedule:
        """Store a recurring schedule; its first occurrence is the first after now. A schedule
        of the tenant with the same name → `Conflict`.

        With `existing_ok`, a schedule of the tenant that already has `schedule.id` is returned
        as stored (for ids derived from a request, `recoup.idempotency.derived_id`: it is an
        earlier try of the same request), its first occurrence materialised if that try
        stopped between the two transactions."""
        validate_schedule_name(schedule.name)
        rule = validate_rule(schedule.rule)
        self.check_target(schedule.target)
        self._ensure_tenant(schedule.tenant)
        if rule != schedule.rule:
            schedule = NewSchedule(**{**_fields(schedule), "rule": rule})
        now = self.clock.now()
        found: Schedule | None = (
            self.store.get_schedule(schedule.tenant, schedule.id) if existing_ok else None
        )
        first = next_in_window(rule, now, schedule.start_at, schedule.end_at)
        stored: Schedule = found or self.store.insert_schedule(
            schedule, next_fire_at=first, now=now
        )
        if stored.next_fire_at is not None and stored.next_fire_at <= now + SCHEDULE_HORIZON:
            # Due within the materialiser's horizon: create its first job now, not at the
            # next worker pass (which could be after the occurrence).
            materialise_one(self.store, stored, now=now)
            self._poke()
        return stored

    def get_schedule(self, schedule_id: str, *, tenant: str = DEFAULT_TENANT) -> Schedule:
        found: Schedule | None = self.store.get_schedule(tenant, schedule_id)
        if found is None:
            raise NotFound(f"no schedule {schedule_id!r}")
        return found

    def list_schedules(
        self,
        *,
        tenant: str = DEFAULT_TENANT,
        paused: bool | None = None,
        name: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        ended: bool | None = None,
        metadata: dict[str, str] | None = None,
    ) -> SchedulePage:
        """The tenant's schedules (not deleted), by name, a page at a time; `paused` picks
        paused (True) or active (False) ones, `ended` those with no occurrence left (True) or
        the others, `name` matches exactly, every pair of `metadata` must be in a
        schedule's metadata."""
        return self.store.list_schedules(
            ScheduleFilter(
                tenant=tenant,
                paused=paused,
                ended=ended,
                name=name,
                metadata=None if metadata is None else check_filter(metadata),
                limit=limit,
                cursor=cursor,
            )
        )

    def pause(self, schedule_id: str, *, tenant: str = DEFAULT_TENANT) -> Schedule:
        """Stop materialising occurrences (jobs already materialised stay; cancel them by
        prefix `{name}@` if they must not run)."""
        found: Schedule | None = self.store.set_schedule_paused(
            tenant, schedule_id, paused=True, now=self.clock.now()
        )
        if found is None:
            raise NotFound(f"no schedule {schedule_id!r}")
        return found

    def resume(self, schedule_id: str, *, tenant: str = DEFAULT_TENANT) -> Schedule:
        """Materialise again from the first occurrence after now (the paused ones are
        skipped, whatever the missed-occurrence policy); a schedule whose window closed while
        it was paused is resumed as ended."""
        current = self.get_schedule(schedule_id, tenant=tenant)
        now = self.clock.now()
        following = next_in_window(current.rule, now, current.start_at, current.end_at)
        if following is None and not current.deleted:
            return self.update_schedule(schedule_id, ScheduleChange(paused=False), tenant=tenant)
        found: Schedule | None = self.store.set_schedule_paused(
            tenant, schedule_id, paused=False, now=now, next_fire_at=following
        )
        if found is None:
            raise NotFound(f"no schedule {schedule_id!r}")
        self._poke()
        return found

    def delete_schedule(self, schedule_id: str, *, tenant: str = DEFAULT_TENANT) -> None:
        """Delete the schedule and cancel its live jobs."""
        if not self.store.delete_schedule(tenant, schedule_id, now=self.clock.now()):
            raise NotFound(f"no schedule {schedule_id!r}")

    def upcoming(
        self, schedule: Schedule | str, count: int = 10, *, tenant: str = DEFAULT_TENANT
    ) -> list[datetime]:
        """The schedule's next `count` occurrences after now (whether paused or not)."""
        if not 1 <= count <= 1000:
            raise InvalidInput("count", count, "expected 1–1000")
        found = (
            schedule
            if isinstance(schedule, Schedule)
            else self.get_schedule(schedule, tenant=tenant)
        )
        return upcoming(
            found.rule, self.clock.now(), count, start_at=found.start_at, end_at=found.end_at
        )

    def materialise(self, *, horizon: timedelta = SCHEDULE_HORIZON) -> int:
        """Materialise due schedule occurrences now (workers do this on their own)."""
        return materialise(self.store, now=self.clock.now(), horizon=horizon)


def next_fire(
    schedule: Schedule, change: ScheduleChange, *, before: Schedule, now: datetime
) -> datetime | None:
    """The next occurrence of the changed `schedule` (the module's docstring)."""
    kept = before.next_fire_at
    if not change.moves_occurrences and kept is not None and kept <= now:
        return kept  # behind (nothing materialised past now): its missed policy still applies
    return next_in_window(schedule.rule, now, schedule.start_at, schedule.end_at)


def _fields(schedule: NewSchedule) -> dict[str, Any]:
    return {name: getattr(schedule, name) for name in schedule.__dataclass_fields__}


__all__ = ["ScheduleCalls"]
