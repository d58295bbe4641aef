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
from typing import Final

from recoup.jobs.metadata import merge_metadata
from recoup.jobs.model import BackoffPolicy, HttpTarget, Job, Target, check_timeout
from recoup.jobs.schedules.model import MissedPolicy, Rule, Schedule, check_window
from recoup.timekeeping.instants import to_utc


def carried_over(new: Target | None, old: Target) -> Target | None:
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


class _Unset:
    """The value of a field a change leaves as it is, where None is a value (a name removed)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


@dataclass(frozen=True, kw_only=True)
class JobChange:
    """What a PATCH of a job changes; None (or `UNSET` where None means "remove") leaves a
    field as it is."""

    run_at: datetime | None = None
    target: Target | None = None
    retry: BackoffPolicy | None = None
    timeout: timedelta | None = None
    name: str | _Unset | None = UNSET
    metadata: Mapping[str, str | None] | None = None  # merged: None removes a key

    def __post_init__(self) -> None:
        if self.run_at is not None:
            object.__setattr__(self, "run_at", to_utc("run_at", self.run_at))
        if self.timeout is not None:
            check_timeout(self.timeout)

    def applied_to(self, job: Job) -> Job:
        """`job` with this change (`InvalidInput` when the merged metadata breaks a limit)."""
        return dataclasses.replace(
            job,
            run_at=job.run_at if self.run_at is None else self.run_at,
            target=carried_over(self.target, job.target) or job.target,
            retry=job.retry if self.retry is None else self.retry,
            timeout=job.timeout if self.timeout is None else self.timeout,
            name=job.name if isinstance(self.name, _Unset) else self.name,
            metadata=(
                job.metadata
                if self.metadata is None
                else merge_metadata(job.metadata, self.metadata)
            ),
        )


@dataclass(frozen=True, kw_only=True)
class ScheduleChange:
    """What a PATCH of a schedule changes; None (or `UNSET` for the window's bounds, where None
    removes one) leaves a field as it is."""

    name: str | None = None
    rule: Rule | None = None
    target: Target | None = None
    retry: BackoffPolicy | None = None
    timeout: timedelta | None = None
    missed: MissedPolicy | None = None
    paused: bool | None = None
    metadata: Mapping[str, str | None] | None = None  # merged: None removes a key
    start_at: datetime | _Unset | None = UNSET
    end_at: datetime | _Unset | None = UNSET

    def __post_init__(self) -> None:
        if self.timeout is not None:
            check_timeout(self.timeout)

    @property
    def moves_occurrences(self) -> bool:
        """Whether the change can move or remove the next occurrence (its rule, its window,
        its pausing): the next one is then computed afresh from now."""
        return (
            self.rule is not None
            or self.paused is not None
            or not isinstance(self.start_at, _Unset)
            or not isinstance(self.end_at, _Unset)
        )


def changed_schedule(current: Schedule, change: ScheduleChange) -> Schedule:
    """`current` with `change` applied, its next occurrence not yet recomputed (the caller
    knows `now`). `InvalidInput` for a window that ends before it starts or metadata past a
    limit."""
    start_at = current.start_at if isinstance(change.start_at, _Unset) else change.start_at
    end_at = current.end_at if isinstance(change.end_at, _Unset) else change.end_at
    check_window(start_at, end_at)
    return dataclasses.replace(
        current,
        name=current.name if change.name is None else change.name,
        rule=current.rule if change.rule is None else change.rule,
        target=carried_over(change.target, current.target) or current.target,
        retry=current.retry if change.retry is None else change.retry,
        timeout=current.timeout if change.timeout is None else change.timeout,
        missed=current.missed if change.missed is None else change.missed,
        paused=current.paused if change.paused is None else change.paused,
        metadata=(
            current.metadata
            if change.metadata is None
            else merge_metadata(current.metadata, change.metadata)
        ),
        start_at=None if start_at is None else to_utc("start_at", start_at),
        end_at=None if end_at is None else to_utc("end_at", end_at),
    )


__all__ = ["UNSET", "JobChange", "ScheduleChange", "changed_schedule"]
