"""Request and response models of /v1/schedules: a cron or anchor rule, and what it yields."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from recoup.errors import InvalidInput
from recoup.jobs.changes import UNSET, ScheduleChange
from recoup.jobs.schedules.model import AnchorRule, CronRule, MissedPolicy, Schedule, ScheduleState
from recoup.jobs.schedules.occurrences import MAX_SCHEDULE_NAME
from recoup.timekeeping.recurrence import RESTRICT_MAX_DAY
from recoup.wire.schemas.callbacks import CallbacksIn, CallbacksOut
from recoup.wire.schemas.codes import TimeZone
from recoup.wire.schemas.common import (
    MIN_TIMEOUT_SECONDS,
    Cron,
    ExactlyOne,
    Flag,
    Instant,
    Integer,
    LocalDateTime,
    Name,
    Number,
    RetryIn,
    RetryOut,
    StrictModel,
    TargetIn,
    TargetOut,
)
from recoup.wire.schemas.flow import FlowIn, FlowOut
from recoup.wire.schemas.metadata import (
    METADATA_DESCRIPTION,
    PATCH_METADATA_DESCRIPTION,
    MetadataIn,
    MetadataPatch,
)
from recoup.wire.schemas.stated import one_of
from recoup.wire.schemas.trace import TracedOut

# The days every month has (1 to `recurrence.RESTRICT_MAX_DAY`), as a day-of-month pattern.
EVERY_MONTHS_DAY = "(?:" + "|".join(f"{d:02d}" for d in range(1, RESTRICT_MAX_DAY + 1)) + ")"
_ON_EVERY_MONTHS_DAY = f"^[0-9]{{4}}-[0-9]{{2}}-{EVERY_MONTHS_DAY}T"
NEEDS_TIMEZONE = "a cron schedule needs a timezone"
ZONE_IN_ANCHOR = "expected no timezone beside an anchor: it carries its zone in anchor.timezone"


class AnchorIn(StrictModel):
    """A billing anchor. Under `restrict`, a month or year step needs `local` on day 1–28."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"properties": {"end_of_month": {"enum": ["clamp", "roll-forward", "last-day"]}}},
                {"required": ["every"], "properties": {"every": {"enum": ["day", "week"]}}},
                {
                    "properties": {
                        "local": {"pattern": f"^[0-9]{{4}}-[0-9]{{2}}-{EVERY_MONTHS_DAY}T"}
                    }
                },
            ]
        }
    )

    local: LocalDateTime = Field(description="Wall-clock time of occurrence 0, no offset.")
    timezone: TimeZone
    every: Literal["day", "week", "month", "year"] = "month"
    interval: Integer = Field(default=1, ge=1, le=1000)
    end_of_month: Literal["clamp", "roll-forward", "last-day", "restrict"] = "clamp"


class ScheduleIn(CallbacksIn):
    """A recurring schedule: `cron` with `timezone`, or `anchor` (which carries its own zone:
    no `timezone` beside it)."""

    model_config = ConfigDict(
        json_schema_extra=one_of(
            {"cron": "string", "timezone": "string", "anchor": "null"},
            {"anchor": "object", "timezone": "null", "cron": "null"},
        )
    )
    exactly_one = (("cron", "anchor"),)

    name: Name | None = Field(default=None, min_length=1, max_length=MAX_SCHEDULE_NAME)
    cron: Cron | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description=(
            "Five fields 'minute hour day-of-month month day-of-week' as Debian cron reads "
            "them (names, ranges low-high, steps, lists, L, W, #; a day that exists in some "
            "month), or @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually."
        ),
    )
    timezone: TimeZone | None = None
    anchor: AnchorIn | None = None
    target: TargetIn
    retry: RetryIn = Field(default_factory=RetryIn)
    timeout_seconds: Number = Field(default=30.0, ge=MIN_TIMEOUT_SECONDS, le=3600)
    missed: Literal["skip", "run_once", "run_all"] = "skip"
    metadata: MetadataIn = Field(default_factory=dict, description=METADATA_DESCRIPTION)
    flow: FlowIn | None = Field(
        default=None, description="Flow control given to every job the schedule fires."
    )
    start_at: Instant | None = Field(
        default=None, description="No occurrence before this instant (RFC 3339, inclusive)."
    )
    end_at: Instant | None = Field(
        default=None,
        description="No occurrence after this instant (inclusive); then the schedule is ended.",
    )

    @classmethod
    def rules_between_fields(cls, data: dict[str, Any]) -> list[tuple[str, str]]:
        broken = super().rules_between_fields(data)
        if data.get("cron") is not None and data.get("timezone") is None:
            broken.append(("timezone", NEEDS_TIMEZONE))
        if data.get("anchor") is not None and data.get("timezone") is not None:
            broken.append(("timezone", ZONE_IN_ANCHOR))
        return broken

    def rule(self) -> CronRule | AnchorRule:
        """The stored rule; `InvalidInput` unless exactly one of `cron` and `anchor`."""
        if (self.cron is None) == (self.anchor is None):
            raise ExactlyOne("cron", "anchor")
        return _rule(self.cron, self.timezone, self.anchor)


def _rule(cron: str | None, timezone: str | None, anchor: AnchorIn | None) -> CronRule | AnchorRule:
    """The rule of `cron` in `timezone`, or of `anchor` (one of them given)."""
    if cron is not None:
        if timezone is None:
            raise InvalidInput("timezone", None, NEEDS_TIMEZONE)
        return CronRule(expression=cron, timezone=timezone)
    assert anchor is not None
    if timezone is not None:
        raise InvalidInput("timezone", timezone, ZONE_IN_ANCHOR)
    return AnchorRule(
        local=anchor.local,
        timezone=anchor.timezone,
        every=anchor.every,
        interval=anchor.interval,
        end_of_month=anchor.end_of_month,
    )


class SchedulePatchIn(StrictModel):
    """A change to a schedule: only the fields given change. A new rule is `cron` (with
    `timezone`) or `anchor`, whole; `timezone` alone moves a cron schedule to another zone.
    `start_at` / `end_at` set to null remove that bound; null elsewhere leaves a field as
    it is; `metadata` merges. The next
    occurrence is computed again, and jobs materialised ahead that have not started are
    replaced by ones from the new definition."""

    name: Name | None = Field(default=None, min_length=1, max_length=MAX_SCHEDULE_NAME)
    cron: Cron | None = Field(default=None, min_length=1, max_length=200)
    timezone: TimeZone | None = None
    anchor: AnchorIn | None = None
    target: TargetIn | None = None
    retry: RetryIn | None = None
    timeout_seconds: Number | None = Field(default=None, ge=MIN_TIMEOUT_SECONDS, le=3600)
    missed: Literal["skip", "run_once", "run_all"] | None = None
    paused: Flag | None = None
    metadata: MetadataPatch | None = Field(default=None, description=PATCH_METADATA_DESCRIPTION)
    start_at: Instant | None = None
    end_at: Instant | None = None

    @classmethod
    def rules_between_fields(cls, data: dict[str, Any]) -> list[tuple[str, str]]:
        broken = super().rules_between_fields(data)
        if data.get("cron") is not None and data.get("anchor") is not None:
            broken += [
                (name, "expected at most one of cron, anchor") for name in ("cron", "anchor")
            ]
        if data.get("anchor") is not None and data.get("timezone") is not None:
            broken.append(("timezone", ZONE_IN_ANCHOR))
        return broken

    def change(self, current: Schedule) -> ScheduleChange:
        """The change to `current`; `InvalidInput` for both `cron` and `anchor`, or a cron
        `timezone` on an anchor schedule."""
        given = self.model_fields_set
        if self.cron is not None and self.anchor is not None:
            raise ExactlyOne("cron", "anchor")
        rule: CronRule | AnchorRule | None = None
        if self.cron is not None:
            # A new expression keeps the schedule's zone unless `timezone` moves it.
            rule = _rule(self.cron, self.timezone or current.rule.timezone, None)
        elif self.anchor is not None:
            rule = _rule(None, self.timezone, self.anchor)
        elif self.timezone is not None:
            # The same rule on another wall clock (a cron's or an anchor's).
            rule = dataclasses.replace(current.rule, timezone=self.timezone)
        # null, like a field left out, leaves a field as it is; only the window's bounds
        # are removed by null.
        return ScheduleChange(
            name=UNSET if self.name is None else self.name,
            rule=UNSET if rule is None else rule,
            target=UNSET if self.target is None else self.target.to_target(),
            retry=UNSET if self.retry is None else self.retry.to_policy(),
            timeout=UNSET
            if self.timeout_seconds is None
            else timedelta(seconds=self.timeout_seconds),
            missed=UNSET if self.missed is None else MissedPolicy(self.missed),
            paused=UNSET if self.paused is None else self.paused,
            metadata=UNSET if self.metadata is None else self.metadata,
            start_at=self.start_at if "start_at" in given else UNSET,
            end_at=self.end_at if "end_at" in given else UNSET,
        )


class AnchorOut(BaseModel):
    local: str
    timezone: str
    every: str
    interval: int
    end_of_month: str


class ScheduleOut(CallbacksOut, TracedOut):
    id: str
    name: str
    cron: str | None
    timezone: str
    anchor: AnchorOut | None
    target: TargetOut
    retry: RetryOut
    timeout_seconds: float
    missed: str
    paused: bool
    state: ScheduleState = Field(
        description="`ended` once no occurrence is left (past `end_at`); else paused or active."
    )
    next_fire_at: datetime | None
    metadata: dict[str, str] = Field(default_factory=dict)
    start_at: datetime | None = None
    end_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    flow: FlowOut | None = None

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleOut:
        rule = schedule.rule
        cron = rule.expression if isinstance(rule, CronRule) else None
        anchor = (
            AnchorOut(
                local=rule.local.isoformat(),
                timezone=rule.timezone,
                every=rule.every,
                interval=rule.interval,
                end_of_month=rule.end_of_month,
            )
            if isinstance(rule, AnchorRule)
            else None
        )
        return cls(
            id=schedule.id,
            name=schedule.name,
            cron=cron,
            timezone=rule.timezone,
            anchor=anchor,
            target=TargetOut.of(schedule.target),
            retry=RetryOut.of(schedule.retry),
            timeout_seconds=schedule.timeout.total_seconds(),
            missed=str(schedule.missed),
            paused=schedule.paused,
            state=schedule.state,
            next_fire_at=schedule.next_fire_at,
            metadata=schedule.metadata,
            start_at=schedule.start_at,
            end_at=schedule.end_at,
            created_at=schedule.created_at,
            updated_at=schedule.updated_at,
            flow=FlowOut.of_limits(schedule.flow),
            **cls.trace_of(schedule.trace),
            **cls.callbacks_of(schedule.target),
        )


class ScheduleListOut(BaseModel):
    schedules: list[ScheduleOut]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end."
    )


class UpcomingOut(BaseModel):
    upcoming: list[datetime] = Field(description="The next occurrences, UTC, earliest first.")


def _seconds(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


__all__ = [
    "AnchorIn",
    "AnchorOut",
    "ScheduleIn",
    "ScheduleListOut",
    "ScheduleOut",
    "SchedulePatchIn",
    "ScheduleState",
    "UpcomingOut",
]
