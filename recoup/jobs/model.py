"""The job and run model: frozen, keyword-only records that refuse naive datetimes.

A job is one unit of work that must happen at `run_at` and take effect once: an HTTP request
or a registered Python handler. Each execution of it is a run (an attempt), logged.

States and their transitions (CHECK constraints in every backend hold the invariants):

    scheduled ──claim──▶ running ──2xx / ok──────────▶ succeeded
        ▲                   │  ──retryable error──▶ scheduled (run_at = now + backoff)
        │                   │  ──final error / attempts spent──▶ failed
        └──lease expired────┘  (rescue; a run with outcome "lost" is logged)
    scheduled | running ──cancel──▶ cancelled
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, TypeVar, get_args

from recoup.errors import InvalidInput
from recoup.jobs.flow import DEFAULT_FLOW_PERIOD, check_flow, check_ordering
from recoup.jobs.metadata import Metadata, check_metadata
from recoup.jobs.trace_context import TraceContext
from recoup.timekeeping.instants import require_aware

DEFAULT_TENANT = "default"
RESPONSE_EXCERPT_LIMIT = 2048  # characters of a target's response kept in the run log
ERROR_LIMIT = 2048  # characters of an error message kept in the run log

R = TypeVar("R")


def trusted(cls: type[R], fields: dict[str, Any]) -> R:
    """A record of `cls` (one of the frozen dataclasses below) from values already checked,
    without `__init__` and `__post_init__`: for the hot paths that build records from what the
    store wrote or from the worker's own clock (decoding a claimed batch, reporting attempts),
    where re-validation costs more than the work itself. `fields` must name every field, every
    instant aware; records built by callers (`NewJob`, `Run(...)`) are still validated."""
    record = object.__new__(cls)
    object.__setattr__(record, "__dict__", fields)
    return record


class JobState(StrEnum):
    SCHEDULED = "scheduled"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_live(self) -> bool:
        return self in (JobState.SCHEDULED, JobState.RUNNING)

    @property
    def is_final(self) -> bool:
        return not self.is_live


class RunOutcome(StrEnum):
    SUCCEEDED = "succeeded"  # the target accepted it
    RETRY = "retry"  # a retryable failure; another attempt is scheduled
    FAILED = "failed"  # a final failure (non-retryable, or attempts spent)
    LOST = "lost"  # the worker's lease expired mid-attempt (crash); the job was rescued
    CANCELLED = "cancelled"  # the job was cancelled while this attempt ran


def new_id() -> str:
    """A UUIDv7 (RFC 9562) in canonical text: time-ordered, for index locality and a readable
    order, and unguessable. Formatted by hand because `uuid.UUID` costs more than the insert
    of the job it names."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (
        (ms & 0xFFFF_FFFF_FFFF) << 80
        | 0x7 << 76  # version 7
        | (rand >> 68) << 64  # 12 random bits (rand_a)
        | 0x2 << 62  # the RFC 9562 variant
        | rand & 0x3FFF_FFFF_FFFF_FFFF  # 62 random bits (rand_b)
    )
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


MAX_ATTEMPTS = 100  # the most attempts a job can make, the first included (a CHECK in storage)


@dataclass(frozen=True, kw_only=True)
class BackoffPolicy:
    """How a job's target is retried: exponential backoff with full jitter, capped.

    `max_attempts` counts every attempt, the first included (1 = never retry).
    """

    max_attempts: int = 5
    min_backoff: timedelta = timedelta(seconds=1)
    max_backoff: timedelta = timedelta(hours=1)
    jitter: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= 100:
            raise InvalidInput("retry.max_attempts", self.max_attempts, "expected 1–100")
        if self.min_backoff < timedelta(0):
            raise InvalidInput(
                "retry.min_backoff_seconds", self.min_backoff.total_seconds(), "expected ≥ 0"
            )
        if self.max_backoff < self.min_backoff:
            raise InvalidInput(
                "retry.max_backoff_seconds",
                self.max_backoff.total_seconds(),
                "expected ≥ min_backoff_seconds",
            )


DEFAULT_RETRY = BackoffPolicy()

# The methods an HTTP target may use, for the Python API and the HTTP API alike (the API's
# schema is this Literal): the seven RFC 9110 methods a webhook or an API call can need, as
# Cloud Tasks and Cloud Scheduler offer them. CONNECT and TRACE are for proxies and
# diagnostics, never a job's work. HEAD and OPTIONS only ask about a resource (a cache warm-up,
# an uptime check): RFC 9110 gives content in such a request no meaning, and a server may refuse
# a HEAD that carries some as a smuggling attempt (§9.3.2), so those targets may not carry a
# body (`BODILESS_METHODS`, refused at creation). GET and DELETE keep theirs: search APIs read
# a GET body, and jobs created with one stay valid.
HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
HTTP_METHODS: tuple[HttpMethod, ...] = get_args(HttpMethod)
BODILESS_METHODS: frozenset[HttpMethod] = frozenset({"HEAD", "OPTIONS"})


@dataclass(frozen=True, kw_only=True)
class HttpTarget:
    url: str
    method: str = "POST"  # one of HTTP_METHODS, in any case (sent upper-cased)
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # JSON value, or a str sent as is
    # How a delivery presents itself: Standard Webhooks headers (every job), plus, for jobs
    # published through the QStash-compatible API, QStash's own (`Upstash-Signature`,
    # `Upstash-Message-Id`, …: `recoup.jobs.qstash_signing`), so QStash receivers verify them.
    delivery: Literal["standard-webhooks", "qstash"] = "standard-webhooks"
    # Where the job's end is reported (`recoup.jobs.callbacks`): `callback` once it succeeded,
    # `failure_callback` once it failed for good (never per retried attempt, never on
    # cancellation). Each report is a job of its own, created with the job's final state.
    callback: str | None = None
    failure_callback: str | None = None
    kind: Literal["http"] = "http"


@dataclass(frozen=True, kw_only=True)
class PythonTarget:
    """A handler registered by name in the worker's process (embedded use)."""

    handler: str
    kind: Literal["python"] = "python"


Target = HttpTarget | PythonTarget


MAX_TIMEOUT = timedelta(hours=1)


def check_timeout(timeout: timedelta) -> None:
    """An attempt's timeout: more than 0, at most an hour (`InvalidInput` naming it)."""
    if timeout <= timedelta(0) or timeout > MAX_TIMEOUT:
        raise InvalidInput(
            "timeout_seconds", timeout.total_seconds(), "expected more than 0 and at most 3600"
        )


# C0 controls, DEL and C1 controls: a terminal or a log obeys them (ESC starts a sequence that
# can rewrite the screen), so names and keys that are printed hold none.
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def control_character_message(found: str, at: int) -> str:
    return f"expected no control characters (found {found!r} at {at})"


def check_printable(field: str, value: str | None) -> None:
    """`InvalidInput` naming `field` for a name or key holding a control character."""
    if value is None:
        return
    found = CONTROL_CHARACTER.search(value)
    if found is not None:
        raise InvalidInput(field, value, control_character_message(found.group(), found.start()))


def check_one_off_name(name: str | None) -> None:
    """`InvalidInput` naming `name` for a one-off job's name with '@': `{schedule}@{instant}`
    names a schedule's occurrences, and a one-off job holding such a name would take (and
    hide) the occurrence's live name."""
    if name is not None and "@" in name:
        raise InvalidInput(
            "name",
            name,
            "expected no '@' in a job's name ('{schedule}@{instant}' names the occurrences "
            "of schedules)",
        )


@dataclass(frozen=True, kw_only=True)
class NewJob:
    """What a caller asks for; the store assigns state, attempts and timestamps."""

    run_at: datetime
    target: Target
    tenant: str = DEFAULT_TENANT
    name: str | None = None
    payload: Any = None
    idempotency_key: str | None = None
    retry: BackoffPolicy = DEFAULT_RETRY
    timeout: timedelta = timedelta(seconds=30)
    keep_for: timedelta | None = timedelta(days=7)  # after completion; None keeps forever
    schedule_id: str | None = None
    # Jobs that belong together (an invoice's attempts): listed and cancelled by exact
    # equality, never as a prefix, so "inv_1" never reaches "inv_1-x".
    group: str | None = None
    # The caller's own references (`recoup.jobs.metadata`: limits, merge, filters).
    metadata: Metadata = field(default_factory=dict)
    # Flow control (`recoup.jobs.flow`): the jobs of one `flow_key` (per tenant) start at most
    # `flow_rate` times per `flow_period` and/or run at most `flow_parallelism` at once, held by
    # the store across every worker.
    flow_key: str | None = None
    flow_rate: int | None = None
    flow_period: timedelta = DEFAULT_FLOW_PERIOD
    flow_parallelism: int | None = None
    # Order within a key (`recoup.jobs.flow`): the tenant's jobs of one `ordering_key` start
    # one at a time, in due-then-creation order; a job awaiting a retry holds the ones behind
    # it until it succeeds or fails for good, unless `ordering_skip_failed` (it then goes back
    # in line by its retry's instant). It is a flow key with a parallelism of 1 (and may have
    # a `flow_rate`), so a job has `flow_key` or `ordering_key`, not both.
    ordering_key: str | None = None
    ordering_skip_failed: bool = False
    # The W3C Trace Context of the request that created it (`recoup.jobs.trace_context`),
    # sent on every delivery and the parent (or, on retries, the link) of its attempts' spans.
    trace: TraceContext | None = None
    id: str = field(default_factory=new_id)

    def __post_init__(self) -> None:
        require_aware("run_at", self.run_at)
        check_timeout(self.timeout)
        if self.metadata:
            object.__setattr__(self, "metadata", check_metadata(self.metadata))
        if self.name is not None and not 1 <= len(self.name) <= 200:
            raise InvalidInput("name", self.name, "expected 1–200 characters")
        if self.group is not None and not 1 <= len(self.group) <= 200:
            raise InvalidInput("group", self.group, "expected 1–200 characters")
        if self.keep_for is not None and self.keep_for < timedelta(0):
            raise InvalidInput("keep_for", self.keep_for, "expected ≥ 0")
        check_ordering(self.ordering_key, self.flow_key, self.flow_parallelism)
        check_flow(
            self.flow_key if self.flow_key is not None else self.ordering_key,
            self.flow_rate,
            self.flow_period,
            1 if self.ordering_key is not None else self.flow_parallelism,
        )


@dataclass(frozen=True, kw_only=True)
class Job:
    id: str
    tenant: str
    name: str | None
    run_at: datetime
    target: Target
    payload: Any
    idempotency_key: str | None
    retry: BackoffPolicy
    timeout: timedelta
    keep_for: timedelta | None
    schedule_id: str | None
    state: JobState
    attempts: int  # attempts started so far
    lease_expires_at: datetime | None
    leased_by: str | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    group: str | None = None
    metadata: Metadata = field(default_factory=dict)
    flow_key: str | None = None
    flow_rate: int | None = None
    flow_period: timedelta = DEFAULT_FLOW_PERIOD
    flow_parallelism: int | None = None
    ordering_key: str | None = None
    ordering_skip_failed: bool = False
    trace: TraceContext | None = None

    @property
    def started(self) -> bool:
        """Whether the job has left the state a PATCH may change: claimed or run at least once,
        or ended."""
        return self.state is not JobState.SCHEDULED or self.attempts > 0

    def __post_init__(self) -> None:
        for name in ("run_at", "created_at", "updated_at"):
            require_aware(name, getattr(self, name))


@dataclass(frozen=True, kw_only=True)
class Run:
    """One attempt of a job, as the run log keeps it."""

    job_id: str
    tenant: str
    attempt: int
    started_at: datetime
    finished_at: datetime
    outcome: RunOutcome
    status_code: int | None = None
    duration_ms: float = 0.0
    response_excerpt: str | None = None
    error: str | None = None
    worker_id: str | None = None

    def __post_init__(self) -> None:
        require_aware("started_at", self.started_at)
        require_aware("finished_at", self.finished_at)


@dataclass(frozen=True, kw_only=True)
class Completion:
    """A worker's report of one attempt. Applied by compare-and-set: it only takes effect if
    the job is still `running`, leased by `worker_id`, at attempt `run.attempt`."""

    run: Run
    worker_id: str
    retry_at: datetime | None = None  # set when run.outcome is RETRY
    # The job that reports this attempt's end to the target's callback URL
    # (`recoup.jobs.callbacks`): inserted in the same transaction as the completion, and only
    # if the job ends with it (succeeded, or failed for good), never when it is retried.
    callback: NewJob | None = None


@dataclass(frozen=True, kw_only=True)
class Tenant:
    id: str
    name: str
    # whsec_…, signs outbound requests (Standard Webhooks). Secrets stay out of the repr, so a
    # record in a log line or a traceback never carries one.
    signing_secret: str = field(repr=False)
    created_at: datetime
    # Set while the tenant is disabled: its tokens are refused, its jobs held, its schedules
    # not fired (`recoup.tenancy`).
    disabled_at: datetime | None = None
    # The secret a rotation replaced: outbound requests carry its signature too until
    # `previous_secret_until`, so receivers can switch to the new secret at their own pace.
    previous_signing_secret: str | None = field(default=None, repr=False)
    previous_secret_until: datetime | None = None

    @property
    def disabled(self) -> bool:
        return self.disabled_at is not None

    def signing_secrets(self, at: datetime) -> tuple[str, ...]:
        """The secrets that sign a request sent at `at`: the current one, then the previous
        one while the rotation's overlap lasts."""
        until = self.previous_secret_until
        if self.previous_signing_secret is not None and until is not None and at < until:
            return (self.signing_secret, self.previous_signing_secret)
        return (self.signing_secret,)
