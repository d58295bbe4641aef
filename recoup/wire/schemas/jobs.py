"""Request and response models of /v1/jobs: a one-off job, a page of jobs, the run log."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from recoup.errors import InvalidInput
from recoup.idempotency import KEY_PATTERN, KEY_RULE
from recoup.jobs.changes import UNSET, JobChange
from recoup.jobs.model import Job, JobState, Run
from recoup.wire.schemas.callbacks import CallbacksIn, JobCallbacksOut
from recoup.wire.schemas.common import (
    MIN_TIMEOUT_SECONDS,
    ExactlyOne,
    Flag,
    Group,
    Instant,
    Name,
    Number,
    RetryIn,
    RetryOut,
    StrictModel,
    TargetIn,
    TargetOut,
    Text,
)
from recoup.wire.schemas.flow import FlowIn, FlowOut
from recoup.wire.schemas.metadata import (
    METADATA_DESCRIPTION,
    PATCH_METADATA_DESCRIPTION,
    MetadataIn,
    MetadataPatch,
)
from recoup.wire.schemas.stated import Stated, one_of
from recoup.wire.schemas.trace import TracedOut

MAX_DELAY_SECONDS = 10 * 366 * 86_400  # ten years: further out is a typo, not a plan
# How far in the past a `run_at` may be without `allow_past`. A client that computes "now"
# on its own clock (a little behind the server's) or retries a lost request for a while sends
# an instant seconds old; five minutes covers that and still catches every real mistake: a
# wrong year or date, or a wrong UTC offset (offsets differ by 15 minutes at least).
PAST_TOLERANCE = timedelta(minutes=5)


_JOB_KEY = re.compile(KEY_PATTERN)


def _job_key(value: str) -> str:
    if not _JOB_KEY.match(value):
        raise ValueError(KEY_RULE)
    return value


# What a delivery can carry as its `Idempotency-Key` header: the request header's rule.
JobKey = Annotated[str, AfterValidator(_job_key), Stated(pattern=KEY_PATTERN)]


class JobIn(CallbacksIn):
    """A one-off job. Exactly one of `run_at` and `delay_seconds`."""

    model_config = ConfigDict(
        json_schema_extra=one_of({"run_at": "string"}, {"delay_seconds": "number"})
    )
    exactly_one = (("run_at", "delay_seconds"),)
    run_at: Instant | None = Field(default=None, description="RFC 3339, with an offset.")
    delay_seconds: Number | None = Field(default=None, ge=0, le=MAX_DELAY_SECONDS)
    target: TargetIn
    name: Name | None = Field(default=None, min_length=1, max_length=200)
    group: Group | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Jobs that belong together: listed and cancelled by this exact value.",
    )
    retry: RetryIn = Field(default_factory=RetryIn)
    timeout_seconds: Number = Field(default=30.0, ge=MIN_TIMEOUT_SECONDS, le=3600)
    metadata: MetadataIn = Field(default_factory=dict, description=METADATA_DESCRIPTION)
    idempotency_key: JobKey | None = Field(
        default=None,
        description="The job's own key, chosen by you: sent as `Idempotency-Key` on every "
        "delivery of the job, and a second job with the same key is not created (the first "
        "one is answered, 200). Distinct from the request's `Idempotency-Key` header, which "
        "replays this request's answer.",
    )
    flow: FlowIn | None = None
    ordering_key: Text | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The tenant's jobs with this key start one at a time, in due-then-creation "
        "order; a job awaiting a retry holds the ones behind it until it succeeds or fails for "
        "good (`ordering_on_failure: skip`: it goes back in line by its retry's instant "
        "instead). Not with `flow.key` (an ordering key is a flow key of parallelism 1; "
        "`flow.rate` may go with it under the same key).",
    )
    ordering_on_failure: Literal["hold", "skip"] = "hold"
    on_conflict: Literal["return", "replace"] = Field(
        default="return",
        description="When a job of the tenant already has this `idempotency_key`: `return` "
        "answers it (200); `replace` replaces it with this one while it has not started, "
        "atomically against a claim (200, the job's id kept), and answers it as it is once "
        "started. `replace` with `delay_seconds` is a debounce: each request moves the run to "
        "`delay_seconds` after the latest.",
    )
    allow_past: Flag = Field(
        default=False,
        description="Accept a `run_at` more than 5 minutes before the server's clock (the job "
        "then runs at once). Without it such a `run_at` is a 422: most likely a mistake.",
    )

    def instant(self, now: datetime) -> datetime:
        """When the job runs; `InvalidInput` unless exactly one of the two fields is given,
        or for a `run_at` before `now` less `PAST_TOLERANCE` without `allow_past`."""
        if (self.run_at is None) == (self.delay_seconds is None):
            raise ExactlyOne("run_at", "delay_seconds")
        if self.run_at is not None:
            check_not_past("run_at", self.run_at, now=now, allowed=self.allow_past)
            return self.run_at
        assert self.delay_seconds is not None
        return now + timedelta(seconds=self.delay_seconds)


def check_not_past(field: str, instant: datetime, *, now: datetime, allowed: bool) -> None:
    """`InvalidInput` naming `field`, its value and the earliest instant allowed, when
    `instant` is before `now` less `PAST_TOLERANCE` and the caller did not allow it."""
    earliest = now - PAST_TOLERANCE
    if allowed or instant >= earliest:
        return
    minutes = int(PAST_TOLERANCE.total_seconds() // 60)
    raise InvalidInput(
        field,
        instant.isoformat(),
        f"expected an instant no earlier than {earliest.astimezone(UTC).isoformat()} (the "
        f"server's clock less {minutes} minutes); to run a past instant at once, send "
        '"allow_past": true',
    )


class JobPatchIn(StrictModel):
    """A change to a job that has not started: only the fields given change (at most one of
    `run_at` and `delay_seconds`, the delay counted from now; a past `run_at` as `POST`
    takes it). `name: null` removes the name; null elsewhere leaves a field as it is;
    `metadata` merges."""

    run_at: Instant | None = Field(default=None, description="RFC 3339, with an offset.")
    delay_seconds: Number | None = Field(default=None, ge=0, le=MAX_DELAY_SECONDS)
    target: TargetIn | None = None
    name: Name | None = Field(default=None, min_length=1, max_length=200)
    retry: RetryIn | None = None
    timeout_seconds: Number | None = Field(default=None, ge=MIN_TIMEOUT_SECONDS, le=3600)
    metadata: MetadataPatch | None = Field(default=None, description=PATCH_METADATA_DESCRIPTION)
    allow_past: Flag = Field(
        default=False, description="Accept a `run_at` more than 5 minutes in the past."
    )

    @classmethod
    def rules_between_fields(cls, data: dict[str, Any]) -> list[tuple[str, str]]:
        broken = super().rules_between_fields(data)
        if data.get("run_at") is not None and data.get("delay_seconds") is not None:
            message = "expected at most one of run_at, delay_seconds"
            broken += [("run_at", message), ("delay_seconds", message)]
        return broken

    def change(self, now: datetime) -> JobChange:
        """The change; `InvalidInput` for a `run_at` in the past without `allow_past`."""
        run_at = self.run_at
        if run_at is not None:
            check_not_past("run_at", run_at, now=now, allowed=self.allow_past)
        if self.delay_seconds is not None:
            run_at = now + timedelta(seconds=self.delay_seconds)
        # null, like a field left out, leaves a field as it is; only `name: null` removes.
        return JobChange(
            run_at=UNSET if run_at is None else run_at,
            target=UNSET if self.target is None else self.target.to_target(),
            retry=UNSET if self.retry is None else self.retry.to_policy(),
            timeout=UNSET
            if self.timeout_seconds is None
            else timedelta(seconds=self.timeout_seconds),
            name=self.name if "name" in self.model_fields_set else UNSET,
            metadata=UNSET if self.metadata is None else self.metadata,
        )


class CancelIn(StrictModel):
    """Exactly one of `name` (the live job with that name), `name_prefix` and `group` (the
    live jobs of exactly that group)."""

    model_config = ConfigDict(
        json_schema_extra=one_of({"name": "string"}, {"name_prefix": "string"}, {"group": "string"})
    )
    exactly_one = (("name", "name_prefix", "group"),)
    name: Text | None = Field(default=None, min_length=1, max_length=200)
    name_prefix: Text | None = Field(default=None, min_length=1, max_length=200)
    group: Group | None = Field(default=None, min_length=1, max_length=200)


class JobOut(JobCallbacksOut, TracedOut):
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
    metadata: dict[str, str] = Field(default_factory=dict)
    idempotency_key: str | None = Field(
        default=None,
        description="The `Idempotency-Key` every delivery of the job carries: the "
        "`idempotency_key` it was created with, else one derived from the creating request's "
        "`Idempotency-Key` and body, else the job's id.",
    )
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    flow: FlowOut | None = None
    ordering_key: str | None = None
    ordering_on_failure: Literal["hold", "skip"] | None = None
    waiting_for: Literal["flow_key", "ordering_key"] | None = Field(
        default=None,
        description="Set while the job is scheduled past its `run_at` with a key: its flow or "
        "ordering key holds it back (a rate, a parallelism, or a job before it in line); it "
        "starts as soon as the key allows. In the answers of GET and the listing.",
    )

    @classmethod
    def of(cls, job: Job, *, now: datetime | None = None) -> JobOut:
        """The job as answered; with `now`, `waiting_for` says whether its key holds it."""
        return cls(
            waiting_for=None if now is None else waiting_for(job, now),
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
            metadata=job.metadata,
            idempotency_key=job.idempotency_key or job.id,
            created_at=job.created_at,
            updated_at=job.updated_at,
            finished_at=job.finished_at,
            flow=FlowOut.of(job),
            ordering_key=job.ordering_key,
            ordering_on_failure=None
            if job.ordering_key is None
            else ("skip" if job.ordering_skip_failed else "hold"),
            **cls.trace_of(job.trace),
            **cls.job_callbacks_of(job.id, job.target),
        )


def waiting_for(job: Job, now: datetime) -> Literal["flow_key", "ordering_key"] | None:
    """Which key holds `job` back at `now`, if any: it is scheduled, due, and has one (a
    worker's claim a moment away reads the same, for less than its horizon)."""
    if job.state is not JobState.SCHEDULED or job.run_at > now:
        return None
    if job.ordering_key is not None:
        return "ordering_key"
    return "flow_key" if job.flow_key is not None else None


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
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end."
    )


class CancelledOut(BaseModel):
    cancelled: int


__all__ = [
    "MAX_DELAY_SECONDS",
    "PAST_TOLERANCE",
    "CancelIn",
    "CancelledOut",
    "JobIn",
    "JobOut",
    "JobPageOut",
    "JobPatchIn",
    "RunOut",
    "RunsOut",
    "check_not_past",
]
