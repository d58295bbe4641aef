"""Request and response models of /v1/schedules: a cron or anchor rule, and what it yields."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from recoup.api.schemas.callbacks import CallbacksIn, CallbacksOut
from recoup.api.schemas.codes import TimeZone
from recoup.api.schemas.common import (
    MIN_TIMEOUT_SECONDS,
    Cron,
    ExactlyOne,
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
from recoup.api.schemas.stated import one_of
from recoup.errors import InvalidInput
from recoup.jobs.schedule_model import AnchorRule, CronRule, Schedule
from recoup.jobs.schedules import MAX_SCHEDULE_NAME
from recoup.timekeeping.recurrence import RESTRICT_MAX_DAY

# The days every month has (1 to `recurrence.RESTRICT_MAX_DAY`), as a day-of-month pattern.
EVERY_MONTHS_DAY = "(?:" + "|".join(f"{d:02d}" for d in range(1, RESTRICT_MAX_DAY + 1)) + ")"
NEEDS_TIMEZONE = "a cron schedule needs a timezone"
ZONE_IN_ANCHOR = "expected no timezone beside an anchor: it carries its zone in anchor.timezone"
_ON_EVERY_MONTHS_DAY = f"^[0-9]{{4}}-[0-9]{{2}}-{EVERY_MONTHS_DAY}T"


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
        if self.cron is not None:
            if self.timezone is None:
                raise InvalidInput("timezone", None, NEEDS_TIMEZONE)
            return CronRule(expression=self.cron, timezone=self.timezone)
        assert self.anchor is not None
        if self.timezone is not None:
            raise InvalidInput("timezone", self.timezone, ZONE_IN_ANCHOR)
        a = self.anchor
        return AnchorRule(
            local=a.local,
            timezone=a.timezone,
            every=a.every,
            interval=a.interval,
            end_of_month=a.end_of_month,
        )


class AnchorOut(BaseModel):
    local: str
    timezone: str
    every: str
    interval: int
    end_of_month: str


class ScheduleOut(CallbacksOut):
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
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime

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
            next_fire_at=schedule.next_fire_at,
            created_at=schedule.created_at,
            updated_at=schedule.updated_at,
            **cls.callbacks_of(schedule.target),
        )


class ScheduleListOut(BaseModel):
    schedules: list[ScheduleOut]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end."
    )


class ScheduleState(StrEnum):
    """A live schedule's state, as the `state` filter of a listing spells it."""

    ACTIVE = "active"
    PAUSED = "paused"


class UpcomingOut(BaseModel):
    upcoming: list[datetime] = Field(description="The next occurrences, UTC, earliest first.")


__all__ = [
    "AnchorIn",
    "AnchorOut",
    "ScheduleIn",
    "ScheduleListOut",
    "ScheduleOut",
    "UpcomingOut",
]
