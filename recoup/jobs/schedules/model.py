"""Recurring schedules: a stored rule (cron in a zone, or a billing anchor) whose occurrences
are materialised as ordinary jobs named `{schedule}@{occurrence instant}`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from recoup.errors import InvalidInput
from recoup.jobs.flow import FlowLimits
from recoup.jobs.metadata import Metadata, check_metadata
from recoup.jobs.model import DEFAULT_TENANT, BackoffPolicy, Target, check_timeout, new_id
from recoup.jobs.trace_context import TraceContext
from recoup.timekeeping.instants import require_aware, to_utc


class MissedPolicy(StrEnum):
    """What to do with occurrences that fell due while nothing was running (downtime)."""

    SKIP = "skip"  # none of them; resume at the next future occurrence
    RUN_ONCE = "run_once"  # one job for the latest missed occurrence
    RUN_ALL = "run_all"  # one job per missed occurrence


@dataclass(frozen=True, kw_only=True)
class CronRule:
    expression: str
    timezone: str
    kind: Literal["cron"] = "cron"


@dataclass(frozen=True, kw_only=True)
class AnchorRule:
    local: datetime  # naive wall-clock anchor (occurrence n = 0)
    timezone: str
    every: str = "month"  # day | week | month | year
    interval: int = 1
    end_of_month: str = "clamp"  # clamp | roll-forward | last-day | restrict
    kind: Literal["anchor"] = "anchor"


Rule = CronRule | AnchorRule


class ScheduleState(StrEnum):
    """A live schedule's state: `ended` once it has no occurrence left (past its `end_at`, or
    a series that ends), whether paused or not; else `paused` or `active`."""

    ACTIVE = "active"
    PAUSED = "paused"
    ENDED = "ended"


def check_window(start_at: datetime | None, end_at: datetime | None) -> None:
    """A schedule's window: aware instants, `end_at` not before `start_at` (`InvalidInput`
    naming `end_at` otherwise)."""
    if start_at is not None:
        to_utc("start_at", start_at)
    if end_at is not None:
        to_utc("end_at", end_at)
    if start_at is not None and end_at is not None and end_at < start_at:
        raise InvalidInput("end_at", end_at.isoformat(), "expected an instant at or after start_at")


@dataclass(frozen=True, kw_only=True)
class NewSchedule:
    name: str
    rule: Rule
    target: Target
    tenant: str = DEFAULT_TENANT
    payload: Any = None
    retry: BackoffPolicy = field(default_factory=BackoffPolicy)
    timeout: timedelta = timedelta(seconds=30)
    missed: MissedPolicy = MissedPolicy.SKIP
    metadata: Metadata = field(default_factory=dict)  # copied onto every job it fires
    # The window: no occurrence before `start_at`, none after `end_at` (each inclusive).
    start_at: datetime | None = None
    end_at: datetime | None = None
    flow: FlowLimits | None = None  # given to every job it fires (`recoup.jobs.flow`)
    # The creating request's trace context (`recoup.jobs.trace_context`), given to every job
    # it fires: each occurrence is traced as linked to the schedule's creation.
    trace: TraceContext | None = None
    id: str = field(default_factory=new_id)

    def __post_init__(self) -> None:
        check_timeout(self.timeout)
        check_window(self.start_at, self.end_at)
        if self.metadata:
            object.__setattr__(self, "metadata", check_metadata(self.metadata))


@dataclass(frozen=True, kw_only=True)
class Schedule:
    id: str
    tenant: str
    name: str
    rule: Rule
    target: Target
    payload: Any
    retry: BackoffPolicy
    timeout: timedelta
    missed: MissedPolicy
    paused: bool
    next_fire_at: datetime | None  # the next occurrence not yet materialised; None when ended
    created_at: datetime
    updated_at: datetime
    deleted: bool = False
    metadata: Metadata = field(default_factory=dict)
    start_at: datetime | None = None
    end_at: datetime | None = None
    # Bumped by every change of the definition (`ScheduleStore.replace_schedule`); an advance
    # planned from an older revision is refused.
    revision: int = 0
    flow: FlowLimits | None = None
    trace: TraceContext | None = None

    @property
    def state(self) -> ScheduleState:
        if self.next_fire_at is None:
            return ScheduleState.ENDED
        return ScheduleState.PAUSED if self.paused else ScheduleState.ACTIVE

    def __post_init__(self) -> None:
        require_aware("created_at", self.created_at)
