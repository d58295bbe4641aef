"""Changes to a job that has not started, and to a schedule (the HTTP API's PATCH): what may
change, and the pure rules that apply a change to the stored record.

- **A job** may change while it is `scheduled` and has never started (no attempt claimed):
  when it runs, its target, retry policy, timeout, name and metadata. Anything else (running,
  retrying after an attempt, ended) is refused; the store checks the state and writes the
  change in one transaction, so a worker claiming the job at that moment either sees the
  change or makes the PATCH fail (`JobStore.update_scheduled_job`).
- **Metadata** merges (Stripe's rule): a key set to a string is set, a key set to None is
  removed, keys not named stay (`recoup.jobs.metadata.merge_metadata`).
- **A schedule**'s new definition is computed here (`changed_schedule`), then stored by a
  compare-and-set on its revision (`ScheduleStore.replace_schedule`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from recoup.jobs.metadata import merge_metadata
from recoup.jobs.model import BackoffPolicy, HttpTarget, Job, Target, check_timeout
from recoup.jobs.schedules.model import MissedPolicy, Rule, Schedule, check_window
from recoup.timekeeping.instants import to_utc


def carried_over(new: Target, old: Target) -> Target:
    """A PATCH's new target keeps what the old one said beyond the request itself: how its
    deliveries present themselves (QStash's or Standard Webhooks') and where its end is
    reported (`callback`, `failure_callback`), unless the new one names its own callbacks."""
    if not isinstance(new, HttpTarget) or not isinstance(old, HttpTarget):
        return new
    return dataclasses.replace(
        new,
        delivery=old.delivery,
        callback=new.callback if new.callback is not None else old.callback,
        failure_callback=(
            new.failure_callback if new.failure_callback is not None else old.failure_callback
        ),
    )


class Unset:
    """The value of a field a change leaves as it is: the one "not given" marker of a change,
    so that None always means "remove" where a field may be removed."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset()
T = TypeVar("T")


def given_or(value: T | Unset, current: T) -> T:
    """`value` when the change gives one, else `current` (the field left as it is)."""
    return current if isinstance(value, Unset) else value


@dataclass(frozen=True, kw_only=True)
class JobChange:
    """What a PATCH of a job changes; a field left `UNSET` stays as it is. Only `name` may be
    None (the name removed)."""

    run_at: datetime | Unset = UNSET
    target: Target | Unset = UNSET
    retry: BackoffPolicy | Unset = UNSET
    timeout: timedelta | Unset = UNSET
    name: str | Unset | None = UNSET
    metadata: Mapping[str, str | None] | Unset = UNSET  # merged: None removes a key

    def __post_init__(self) -> None:
        if not isinstance(self.run_at, Unset):
            object.__setattr__(self, "run_at", to_utc("run_at", self.run_at))
        if not isinstance(self.timeout, Unset):
            check_timeout(self.timeout)

    def applied_to(self, job: Job) -> Job:
        """`job` with this change (`InvalidInput` when the merged metadata breaks a limit)."""
        return _applied(self, job)


@dataclass(frozen=True, kw_only=True)
class ScheduleChange:
    """What a PATCH of a schedule changes; a field left `UNSET` stays as it is. Only the
    window's bounds may be None (that bound removed)."""

    name: str | Unset = UNSET
    rule: Rule | Unset = UNSET
    target: Target | Unset = UNSET
    retry: BackoffPolicy | Unset = UNSET
    timeout: timedelta | Unset = UNSET
    missed: MissedPolicy | Unset = UNSET
    paused: bool | Unset = UNSET
    metadata: Mapping[str, str | None] | Unset = UNSET  # merged: None removes a key
    start_at: datetime | Unset | None = UNSET
    end_at: datetime | Unset | None = UNSET

    def __post_init__(self) -> None:
        if not isinstance(self.timeout, Unset):
            check_timeout(self.timeout)

    @property
    def moves_occurrences(self) -> bool:
        """Whether the change can move or remove the next occurrence (its rule, its window,
        its pausing): the next one is then computed afresh from now."""
        return not all(
            isinstance(value, Unset)
            for value in (self.rule, self.paused, self.start_at, self.end_at)
        )


_Record = TypeVar("_Record", Job, Schedule)


def _applied(change: JobChange | ScheduleChange, record: _Record) -> _Record:
    """`record` with every field `change` gives, one rule for both kinds of change (each of
    a change's fields names the record's field it changes): the target carried over from the
    old one (`carried_over`), metadata merged into the old (`merge_metadata`: `InvalidInput`
    past a limit), any other field replaced."""
    given: dict[str, Any] = {}
    for field in dataclasses.fields(change):
        value = getattr(change, field.name)
        if isinstance(value, Unset):
            continue
        if field.name == "target":
            value = carried_over(value, record.target)
        elif field.name == "metadata":
            value = merge_metadata(record.metadata, value)
        given[field.name] = value
    return dataclasses.replace(record, **given)


def changed_schedule(current: Schedule, change: ScheduleChange) -> Schedule:
    """`current` with `change` applied, its next occurrence not yet recomputed (the caller
    knows `now`). `InvalidInput` for a window that ends before it starts or metadata past a
    limit."""
    start_at = given_or(change.start_at, current.start_at)
    end_at = given_or(change.end_at, current.end_at)
    check_window(start_at, end_at)
    return dataclasses.replace(
        _applied(change, current),
        start_at=None if start_at is None else to_utc("start_at", start_at),
        end_at=None if end_at is None else to_utc("end_at", end_at),
    )


__all__ = ["UNSET", "JobChange", "ScheduleChange", "Unset", "changed_schedule", "given_or"]
