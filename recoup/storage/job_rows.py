"""The one mapping between the job scheduler's records (jobs, runs, schedules, tenants) and
table rows, shared by every backend; and the opaque page cursor.

- target, payload and schedule rules are JSON text (jsonb in PostgreSQL);
- enums are stored as their string values;
- durations are float seconds (`*_s` columns);
- a job's `group` is the column `job_group` (GROUP is an SQL keyword);
- the retry policy is four columns, not JSON, because SQL needs `max_attempts` (rescue fails a
  job whose attempts are spent) and CHECK constraints can then hold the policy's invariants;
- instants are backend-specific (SQLite: integer microseconds since the Unix epoch, UTC;
  PostgreSQL: timestamptz), so encoders and decoders take the instant codec as an argument.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from recoup.errors import InvalidInput
from recoup.jobs.model import (
    HttpTarget,
    Job,
    JobState,
    NewJob,
    PythonTarget,
    RetryPolicy,
    Run,
    RunOutcome,
    Target,
    Tenant,
    trusted,
)
from recoup.jobs.schedule_model import (
    AnchorRule,
    CronRule,
    MissedPolicy,
    NewSchedule,
    Rule,
    Schedule,
)
from recoup.tenancy import TenantInfo

# Column order of every query that returns jobs (see `{job_columns}` in the .sql files).
JOB_COLUMNS = (
    "id",
    "tenant",
    "name",
    "run_at",
    "target",
    "payload",
    "idempotency_key",
    "max_attempts",
    "min_backoff_s",
    "max_backoff_s",
    "jitter",
    "timeout_s",
    "keep_for_s",
    "schedule_id",
    "job_group",
    "state",
    "attempts",
    "lease_expires_at",
    "leased_by",
    "last_error",
    "created_at",
    "updated_at",
    "finished_at",
)

# Column order of a new job's row (state 'scheduled' and attempts 0 come from the SQL; see
# `{insert_columns}` in the .sql files). `occurrence_at` is not read back: it is the run_at a
# schedule's job was created with (NULL for other jobs), the immutable identity of its
# occurrence, unique per schedule.
INSERT_COLUMNS = (
    "id",
    "tenant",
    "name",
    "run_at",
    "target",
    "payload",
    "idempotency_key",
    "max_attempts",
    "min_backoff_s",
    "max_backoff_s",
    "jitter",
    "timeout_s",
    "keep_for_s",
    "schedule_id",
    "job_group",
    "occurrence_at",
    "created_at",
    "updated_at",
)

SCHEDULE_COLUMNS = (
    "id",
    "tenant",
    "name",
    "rule",
    "target",
    "payload",
    "max_attempts",
    "min_backoff_s",
    "max_backoff_s",
    "jitter",
    "timeout_s",
    "missed",
    "paused",
    "next_fire_at",
    "created_at",
    "updated_at",
    "deleted_at",
)

RUN_COLUMNS = (
    "job_id",
    "tenant",
    "attempt",
    "started_at",
    "finished_at",
    "outcome",
    "status_code",
    "duration_ms",
    "response_excerpt",
    "error",
    "worker_id",
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_US = timedelta(microseconds=1)

EncodeInstant = Callable[[datetime], Any]
DecodeInstant = Callable[[Any], datetime]


def micros(instant: datetime) -> int:
    """An aware instant as integer microseconds since the Unix epoch (SQLite's storage)."""
    return (instant - _EPOCH) // ONE_US


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def aware_utc(value: datetime) -> datetime:
    """PostgreSQL hands back timestamptz in the session zone (UTC); normalise anyway."""
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def seconds(delta: timedelta) -> float:
    return delta.total_seconds()


# One encoder for the process: `json.dumps` with options builds a new encoder on every call.
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
JSONB_VERSION = b"\x01"  # first byte of jsonb's binary wire format (PostgreSQL's jsonb_recv)


def dumps(value: Any) -> str:
    """Compact JSON; non-ASCII kept as is."""
    return _ENCODE(value)


def _loads(value: Any) -> Any:
    # SQLite returns JSON as text; psycopg returns jsonb already decoded.
    return json.loads(value) if isinstance(value, str | bytes) else value


# Targets


def target_to_dict(target: Target) -> dict[str, Any]:
    if isinstance(target, HttpTarget):
        return {
            "kind": "http",
            "url": target.url,
            "method": target.method,
            "headers": target.headers,
            "body": target.body,
        }
    return {"kind": "python", "handler": target.handler}


def target_from_dict(data: dict[str, Any]) -> Target:
    kind = data.get("kind")
    if kind == "http":
        return HttpTarget(
            url=data["url"],
            method=data.get("method", "POST"),
            headers=dict(data.get("headers") or {}),
            body=data.get("body"),
        )
    if kind == "python":
        return PythonTarget(handler=data["handler"])
    raise InvalidInput("target.kind", kind, "expected 'http' or 'python'")


def payload_json(payload: Any) -> str | None:
    return None if payload is None else dumps(payload)


# Rules


def rule_to_dict(rule: Rule) -> dict[str, Any]:
    if isinstance(rule, CronRule):
        return {"kind": "cron", "expression": rule.expression, "timezone": rule.timezone}
    return {
        "kind": "anchor",
        "local": rule.local.isoformat(),
        "timezone": rule.timezone,
        "every": rule.every,
        "interval": rule.interval,
        "end_of_month": rule.end_of_month,
    }


def rule_from_dict(data: dict[str, Any]) -> Rule:
    if data.get("kind") == "cron":
        return CronRule(expression=data["expression"], timezone=data["timezone"])
    return AnchorRule(
        local=datetime.fromisoformat(data["local"]),
        timezone=data["timezone"],
        every=data["every"],
        interval=int(data["interval"]),
        end_of_month=data["end_of_month"],
    )


# Retry policies: (max_attempts, min_backoff_s, max_backoff_s, jitter)


def retry_values(policy: RetryPolicy) -> tuple[int, float, float, bool]:
    return (
        policy.max_attempts,
        policy.min_backoff.total_seconds(),
        policy.max_backoff.total_seconds(),
        policy.jitter,
    )


# Decoding a claimed batch builds the same few policies and durations over and over; they are
# immutable, so each distinct value is built (and validated) once.
@functools.lru_cache(maxsize=256)
def retry_from_values(max_attempts: int, min_s: float, max_s: float, jitter: Any) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=max_attempts,
        min_backoff=timedelta(seconds=min_s),
        max_backoff=timedelta(seconds=max_s),
        jitter=bool(jitter),
    )


@functools.lru_cache(maxsize=256)
def duration(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


# Jobs


class JobEncoder:
    """Encodes new jobs to rows in `INSERT_COLUMNS` order. Bulk inserts share targets and
    policies between many jobs, so their JSON and columns are cached per object for the
    encoder's life (one call).

    JSON columns are text, or with `jsonb_binary` the bytes of jsonb's binary wire format
    (PostgreSQL's binary COPY sends them as they are, with no dumper in between)."""

    def __init__(self, instant: EncodeInstant, *, jsonb_binary: bool = False) -> None:
        self._instant = instant
        self._binary = jsonb_binary
        self._targets: dict[int, tuple[Target, str | bytes]] = {}
        self._retries: dict[RetryPolicy, tuple[int, float, float, bool]] = {}

    def json(self, value: Any) -> str | bytes:
        text = _ENCODE(value)
        return JSONB_VERSION + text.encode() if self._binary else text

    def target(self, target: Target) -> str | bytes:
        cached = self._targets.get(id(target))
        # Keep the object in the value so its id cannot be reused while cached.
        if cached is not None and cached[0] is target:
            return cached[1]
        encoded = self.json(target_to_dict(target))
        self._targets[id(target)] = (target, encoded)
        return encoded

    def retry(self, policy: RetryPolicy) -> tuple[int, float, float, bool]:
        values = self._retries.get(policy)
        if values is None:
            values = self._retries[policy] = retry_values(policy)
        return values

    def row(self, job: NewJob, now: Any) -> tuple[Any, ...]:
        """`now` is already encoded (it is the same for every row of a batch)."""
        max_attempts, min_s, max_s, jitter = self.retry(job.retry)
        run_at = self._instant(job.run_at)
        return (
            job.id,
            job.tenant,
            job.name,
            run_at,
            self.target(job.target),
            None if job.payload is None else self.json(job.payload),
            job.idempotency_key,
            max_attempts,
            min_s,
            max_s,
            jitter,
            job.timeout.total_seconds(),
            None if job.keep_for is None else job.keep_for.total_seconds(),
            job.schedule_id,
            job.group,
            None if job.schedule_id is None else run_at,  # occurrence_at
            now,
            now,
        )


# Decoding targets: a claimed batch names the same few handlers over and over. Python targets
# are immutable, so one object per distinct value is shared (HTTP targets hold a headers dict,
# so each row gets its own). Bounded, in case handler names are unbounded.
_TARGET_CACHE_LIMIT = 4096
_TARGETS_BY_TEXT: dict[str, Target] = {}
_PYTHON_TARGETS: dict[str, PythonTarget] = {}
_JOB_STATES = {state.value: state for state in JobState}


def decode_target(value: Any) -> Target:
    """A target column: JSON text (SQLite, or PostgreSQL read as text) or a decoded dict."""
    if isinstance(value, str):
        cached = _TARGETS_BY_TEXT.get(value)
        if cached is not None:
            return cached
        target = target_from_dict(json.loads(value))
        if isinstance(target, PythonTarget) and len(_TARGETS_BY_TEXT) < _TARGET_CACHE_LIMIT:
            _TARGETS_BY_TEXT[value] = target
        return target
    if isinstance(value, dict) and value.get("kind") == "python" and "handler" in value:
        handler = value["handler"]
        python = _PYTHON_TARGETS.get(handler) if isinstance(handler, str) else None
        if python is None:
            python = PythonTarget(handler=handler)
            if isinstance(handler, str) and len(_PYTHON_TARGETS) < _TARGET_CACHE_LIMIT:
                _PYTHON_TARGETS[handler] = python
        return python
    return target_from_dict(_loads(value))


def job_from_row(row: Sequence[Any], instant: DecodeInstant) -> Job:
    """Decode a row in `JOB_COLUMNS` order. The row is what the store wrote (validated on the
    way in), so the record is built with `trusted`, without re-validating it."""
    (
        id_,
        tenant,
        name,
        run_at,
        target,
        payload,
        idempotency_key,
        max_attempts,
        min_s,
        max_s,
        jitter,
        timeout_s,
        keep_for_s,
        schedule_id,
        job_group,
        state,
        attempts,
        lease_expires_at,
        leased_by,
        last_error,
        created_at,
        updated_at,
        finished_at,
    ) = row
    return trusted(
        Job,
        {
            "id": id_,
            "tenant": tenant,
            "name": name,
            "run_at": instant(run_at),
            "target": decode_target(target),
            "payload": None if payload is None else _loads(payload),
            "idempotency_key": idempotency_key,
            "retry": retry_from_values(max_attempts, min_s, max_s, jitter),
            "timeout": duration(timeout_s),
            "keep_for": None if keep_for_s is None else duration(keep_for_s),
            "schedule_id": schedule_id,
            "state": _JOB_STATES[state],
            "attempts": attempts,
            "lease_expires_at": None if lease_expires_at is None else instant(lease_expires_at),
            "leased_by": leased_by,
            "last_error": last_error,
            "created_at": instant(created_at),
            "updated_at": instant(updated_at),
            "finished_at": None if finished_at is None else instant(finished_at),
            "group": job_group,
        },
    )


# Runs


def run_from_row(row: Sequence[Any], instant: DecodeInstant) -> Run:
    """Decode a row in `RUN_COLUMNS` order."""
    (
        job_id,
        tenant,
        attempt,
        started_at,
        finished_at,
        outcome,
        status_code,
        duration_ms,
        response_excerpt,
        error,
        worker_id,
    ) = row
    return Run(
        job_id=job_id,
        tenant=tenant,
        attempt=attempt,
        started_at=instant(started_at),
        finished_at=instant(finished_at),
        outcome=RunOutcome(outcome),
        status_code=status_code,
        duration_ms=duration_ms,
        response_excerpt=response_excerpt,
        error=error,
        worker_id=worker_id,
    )


# Tenants


def tenant_from_row(row: Sequence[Any], instant: DecodeInstant) -> Tenant:
    id_, name, signing_secret, created_at = row
    return Tenant(id=id_, name=name, signing_secret=signing_secret, created_at=instant(created_at))


def tenant_info_from_row(row: Sequence[Any], instant: DecodeInstant) -> TenantInfo:
    """A row of `id, name, created_at` (the `list_tenants` query)."""
    return TenantInfo(id=row[0], name=row[1], created_at=instant(row[2]))


# Schedules


def schedule_from_row(row: Sequence[Any], instant: DecodeInstant) -> Schedule:
    """Decode a row in `SCHEDULE_COLUMNS` order."""
    (
        id_,
        tenant,
        name,
        rule,
        target,
        payload,
        max_attempts,
        min_s,
        max_s,
        jitter,
        timeout_s,
        missed,
        paused,
        next_fire_at,
        created_at,
        updated_at,
        deleted_at,
    ) = row
    return Schedule(
        id=id_,
        tenant=tenant,
        name=name,
        rule=rule_from_dict(_loads(rule)),
        target=target_from_dict(_loads(target)),
        payload=None if payload is None else _loads(payload),
        retry=retry_from_values(max_attempts, min_s, max_s, jitter),
        timeout=timedelta(seconds=timeout_s),
        missed=MissedPolicy(missed),
        paused=bool(paused),
        next_fire_at=None if next_fire_at is None else instant(next_fire_at),
        created_at=instant(created_at),
        updated_at=instant(updated_at),
        deleted=deleted_at is not None,
    )


# Cursors: opaque to callers, (created_at µs, id) of the last job of a page.


def encode_cursor(created_at: datetime, job_id: str) -> str:
    raw = f"{micros(created_at)}:{job_id}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created_us, job_id = base64.urlsafe_b64decode(padded).decode().split(":", 1)
        return from_micros(int(created_us)), job_id
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("cursor", cursor, "expected a cursor from a previous page") from None


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching names that start with `prefix` (escape character: backslash)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def schedule_values(
    schedule: NewSchedule, *, next_fire_at: datetime | None, now: datetime, instant: EncodeInstant
) -> dict[str, Any]:
    """The named parameters of the `insert_schedule` query, instants through `instant`."""
    max_attempts, min_s, max_s, jitter = retry_values(schedule.retry)
    return {
        "id": schedule.id,
        "tenant": schedule.tenant,
        "name": schedule.name,
        "rule": dumps(rule_to_dict(schedule.rule)),
        "target": dumps(target_to_dict(schedule.target)),
        "payload": payload_json(schedule.payload),
        "max_attempts": max_attempts,
        "min_backoff_s": min_s,
        "max_backoff_s": max_s,
        "jitter": jitter,
        "timeout_s": schedule.timeout.total_seconds(),
        "missed": schedule.missed.value,
        "next_fire_at": None if next_fire_at is None else instant(next_fire_at),
        "now": instant(now),
    }
