"""Request and response models of the /v1 API.

Requests are strict (`extra="forbid"`: an unknown or misspelt field is an error naming it, never
silently ignored; no string may hold NUL, which PostgreSQL cannot store); responses are plain
models so /openapi.json describes every body.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    NaiveDatetime,
)

from recoup.errors import InvalidInput
from recoup.jobs.model import HttpTarget, Job, JobState, RetryPolicy, Run, Target
from recoup.jobs.schedule_model import AnchorRule, CronRule, Schedule

MAX_DELAY_SECONDS = 10 * 366 * 86_400  # ten years: further out is a typo, not a plan
HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]


class ExactlyOne(InvalidInput):
    """Fields of which exactly one must be given: the problem names each."""

    def __init__(self, *fields: str) -> None:
        self.fields = fields
        names = " and ".join(fields) if len(fields) == 2 else ", ".join(fields)
        super().__init__(fields[0], None, f"expected exactly one of {names}")


def _no_nul(value: str) -> str:
    # PostgreSQL text cannot hold NUL; refused here, by field, on every backend alike.
    if "\x00" in value:
        raise ValueError("expected no NUL (\\x00) characters")
    return value


def _no_nul_inside(value: JsonValue) -> JsonValue:
    """`_no_nul` through a JSON value (strings, keys, nested arrays and objects)."""
    if isinstance(value, str):
        _no_nul(value)
    elif isinstance(value, list):
        for item in value:
            _no_nul_inside(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_nul(key)
            _no_nul_inside(item)
    return value


Text = Annotated[str, AfterValidator(_no_nul)]  # every string an API body carries


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class TargetIn(_Strict):
    url: Text = Field(min_length=1, max_length=2048, description="http:// or https:// URL.")
    method: HttpMethod = "POST"
    headers: dict[Text, Text] = Field(
        default_factory=dict,
        max_length=50,
        description="Names are RFC 9110 tokens; values printable ASCII, no CR/LF.",
    )
    body: Annotated[JsonValue, AfterValidator(_no_nul_inside)] = Field(
        default=None, description="A JSON value, or a string sent as is."
    )

    def to_target(self) -> HttpTarget:
        return HttpTarget(
            url=self.url, method=self.method, headers=dict(self.headers), body=self.body
        )


class RetryIn(_Strict):
    max_attempts: int = Field(default=5, ge=1, le=100, description="Every attempt, the first too.")
    # At least 0.1 s: a zero backoff retries at once, which is no backoff at all.
    min_backoff_seconds: float = Field(default=1.0, ge=0.1, le=7 * 86_400)
    max_backoff_seconds: float = Field(default=3600.0, ge=0.1, le=7 * 86_400)

    def to_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts,
            min_backoff=timedelta(seconds=self.min_backoff_seconds),
            max_backoff=timedelta(seconds=self.max_backoff_seconds),
        )


class JobIn(_Strict):
    """A one-off job. Exactly one of `run_at` and `delay_seconds`."""

    run_at: AwareDatetime | None = Field(default=None, description="ISO-8601 with an offset.")
    delay_seconds: float | None = Field(default=None, ge=0, le=MAX_DELAY_SECONDS)
    target: TargetIn
    name: Text | None = Field(default=None, min_length=1, max_length=200)
    group: Text | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Jobs that belong together: listed and cancelled by this exact value.",
    )
    retry: RetryIn = Field(default_factory=RetryIn)
    timeout_seconds: float = Field(default=30.0, gt=0, le=3600)

    def instant(self, now: datetime) -> datetime:
        """When the job runs; `InvalidInput` unless exactly one of the two fields is given."""
        if (self.run_at is None) == (self.delay_seconds is None):
            raise ExactlyOne("run_at", "delay_seconds")
        if self.run_at is not None:
            return self.run_at
        assert self.delay_seconds is not None
        return now + timedelta(seconds=self.delay_seconds)


class CancelIn(_Strict):
    """Exactly one of `name` (the live job with that name), `name_prefix` and `group` (the
    live jobs of exactly that group)."""

    name: Text | None = Field(default=None, min_length=1, max_length=200)
    name_prefix: Text | None = Field(default=None, min_length=1, max_length=200)
    group: Text | None = Field(default=None, min_length=1, max_length=200)


class AnchorIn(_Strict):
    local: NaiveDatetime = Field(description="Wall-clock time of occurrence 0, no offset.")
    timezone: Text = Field(min_length=1, max_length=100)
    every: Literal["day", "week", "month", "year"] = "month"
    interval: int = Field(default=1, ge=1, le=1000)
    end_of_month: Literal["clamp", "roll-forward", "last-day"] = "clamp"


class ScheduleIn(_Strict):
    """A recurring schedule: `cron` with `timezone`, or `anchor`."""

    name: Text | None = Field(default=None, min_length=1, max_length=200)
    cron: Text | None = Field(default=None, min_length=1, max_length=200)
    timezone: Text | None = Field(default=None, min_length=1, max_length=100)
    anchor: AnchorIn | None = None
    target: TargetIn
    retry: RetryIn = Field(default_factory=RetryIn)
    timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    missed: Literal["skip", "run_once", "run_all"] = "skip"

    def rule(self) -> CronRule | AnchorRule:
        """The stored rule; `InvalidInput` unless exactly one of `cron` and `anchor`."""
        if (self.cron is None) == (self.anchor is None):
            raise ExactlyOne("cron", "anchor")
        if self.cron is not None:
            if self.timezone is None:
                raise InvalidInput("timezone", None, "a cron schedule needs a timezone")
            return CronRule(expression=self.cron, timezone=self.timezone)
        assert self.anchor is not None
        if self.timezone is not None:
            raise InvalidInput(
                "timezone", self.timezone, "an anchor carries its zone in anchor.timezone"
            )
        a = self.anchor
        return AnchorRule(
            local=a.local,
            timezone=a.timezone,
            every=a.every,
            interval=a.interval,
            end_of_month=a.end_of_month,
        )


# Responses


class TargetOut(BaseModel):
    kind: Literal["http", "python"]
    url: str | None = None
    method: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    body: JsonValue = None
    handler: str | None = None

    @classmethod
    def of(cls, target: Target) -> TargetOut:
        if isinstance(target, HttpTarget):
            return cls(
                kind="http",
                url=target.url,
                method=target.method,
                headers=dict(target.headers),
                body=target.body,
            )
        return cls(kind="python", handler=target.handler)


class RetryOut(BaseModel):
    max_attempts: int
    min_backoff_seconds: float
    max_backoff_seconds: float

    @classmethod
    def of(cls, policy: RetryPolicy) -> RetryOut:
        return cls(
            max_attempts=policy.max_attempts,
            min_backoff_seconds=policy.min_backoff.total_seconds(),
            max_backoff_seconds=policy.max_backoff.total_seconds(),
        )


class JobOut(BaseModel):
    id: str
    name: str | None
    state: JobState
    run_at: datetime
    target: TargetOut
    retry: RetryOut
    timeout_seconds: float
    attempts: int
    last_error: str | None
    schedule_id: str | None
    # A default, so that the client still reads the jobs of a server from before groups.
    group: str | None = None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, job: Job) -> JobOut:
        return cls(
            id=job.id,
            name=job.name,
            state=job.state,
            run_at=job.run_at,
            target=TargetOut.of(job.target),
            retry=RetryOut.of(job.retry),
            timeout_seconds=job.timeout.total_seconds(),
            attempts=job.attempts,
            last_error=job.last_error,
            schedule_id=job.schedule_id,
            group=job.group,
            created_at=job.created_at,
            updated_at=job.updated_at,
            finished_at=job.finished_at,
        )


class JobPageOut(BaseModel):
    jobs: list[JobOut]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end."
    )


class RunOut(BaseModel):
    attempt: int
    started_at: datetime
    finished_at: datetime
    duration_ms: float
    status_code: int | None
    error: str | None
    response_excerpt: str | None
    outcome: str

    @classmethod
    def of(cls, run: Run) -> RunOut:
        return cls(
            attempt=run.attempt,
            started_at=run.started_at,
            finished_at=run.finished_at,
            duration_ms=run.duration_ms,
            status_code=run.status_code,
            error=run.error,
            response_excerpt=run.response_excerpt,
            outcome=str(run.outcome),
        )


class RunsOut(BaseModel):
    runs: list[RunOut]


class CancelledOut(BaseModel):
    cancelled: int


class AnchorOut(BaseModel):
    local: str
    timezone: str
    every: str
    interval: int
    end_of_month: str


class ScheduleOut(BaseModel):
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
        )


class ScheduleListOut(BaseModel):
    schedules: list[ScheduleOut]


class UpcomingOut(BaseModel):
    upcoming: list[datetime] = Field(description="The next occurrences, UTC, earliest first.")


class Health(BaseModel):
    status: Literal["ok"]
