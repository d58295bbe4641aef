"""Recurring schedules: a stored rule (cron in a zone, or a billing anchor) whose occurrences
are materialised as ordinary jobs named `{schedule}@{occurrence instant}`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from recoup.jobs.model import DEFAULT_TENANT, BackoffPolicy, Target, check_timeout, new_id
from recoup.timekeeping.instants import require_aware


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
    id: str = field(default_factory=new_id)

    def __post_init__(self) -> None:
        check_timeout(self.timeout)


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

    def __post_init__(self) -> None:
        require_aware("created_at", self.created_at)
