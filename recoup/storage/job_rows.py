"""The one mapping between the job scheduler's records (jobs, runs, schedules, tenants) and
table rows, shared by every backend: column orders, codecs and the encoding of records into rows
(`row_decoding` reads them back); and the page cursor.

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

import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from recoup.errors import InvalidInput
from recoup.jobs.model import BackoffPolicy, HttpTarget, NewJob, Target
from recoup.jobs.schedules.model import CronRule, NewSchedule, Rule

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
    "metadata",
    "flow_key",
    "flow_rate",
    "flow_period_s",
    "flow_parallelism",
    "flow_order",
    "traceparent",
    "tracestate",
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
    "metadata",
    "flow_key",
    "flow_rate",
    "flow_period_s",
    "flow_parallelism",
    "flow_order",
    "flow_order_at",
    "traceparent",
    "tracestate",
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
    "metadata",
    "start_at",
    "end_at",
    "revision",
    "flow",
    "traceparent",
    "tracestate",
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


def remembering(decode: DecodeInstant) -> DecodeInstant:
    """`decode`, remembering each value's instant, for one batch of rows: a claim's rows share
    a few instants (its own `updated_at` and lease end on every row, a bulk insert's
    `created_at` and `run_at`), and an instant is immutable, so each is built once per batch
    rather than once per column of every row."""
    seen: dict[Any, datetime] = {}

    def remembered(value: Any) -> datetime:
        instant = seen.get(value)
        if instant is None:
            instant = seen[value] = decode(value)
        return instant

    return remembered


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


# Targets


def target_to_dict(target: Target) -> dict[str, Any]:
    if isinstance(target, HttpTarget):
        encoded = {
            "kind": "http",
            "url": target.url,
            "method": target.method,
            "headers": target.headers,
            "body": target.body,
        }
        if target.delivery != "standard-webhooks":  # rows of ordinary jobs stay as they were
            encoded["delivery"] = target.delivery
        if target.callback is not None:
            encoded["callback"] = target.callback
        if target.failure_callback is not None:
            encoded["failure_callback"] = target.failure_callback
        return encoded
    return {"kind": "python", "handler": target.handler}


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


# Retry policies: (max_attempts, min_backoff_s, max_backoff_s, jitter)


def retry_values(policy: BackoffPolicy) -> tuple[int, float, float, bool]:
    return (
        policy.max_attempts,
        policy.min_backoff.total_seconds(),
        policy.max_backoff.total_seconds(),
        policy.jitter,
    )


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
        self._retries: dict[BackoffPolicy, tuple[int, float, float, bool]] = {}
        self._empty_metadata = self.json({})

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

    def retry(self, policy: BackoffPolicy) -> tuple[int, float, float, bool]:
        values = self._retries.get(policy)
        if values is None:
            values = self._retries[policy] = retry_values(policy)
        return values

    @staticmethod
    def flow(job: NewJob, run_at: Any) -> tuple[Any, ...]:
        """The flow columns: an ordering key is stored as a flow key of parallelism 1 whose
        `flow_order` says so; `flow_order_at`, its place in line, stays the job's first
        `run_at` when a failed job holds the ones behind it ('hold')."""
        if job.ordering_key is not None:
            hold = not job.ordering_skip_failed
            period = job.flow_period.total_seconds()
            return (
                job.ordering_key,
                job.flow_rate,
                period,
                1,
                "hold" if hold else "skip",
                run_at if hold else None,
            )
        if job.flow_key is None:
            return (None, None, None, None, None, None)
        period = job.flow_period.total_seconds()
        return (job.flow_key, job.flow_rate, period, job.flow_parallelism, None, None)

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
            self.json(job.metadata) if job.metadata else self._empty_metadata,
            *self.flow(job, run_at),
            None if job.trace is None else job.trace.traceparent,
            None if job.trace is None else job.trace.tracestate,
            now,
            now,
        )


# The columns a new row holds that its insert does not send (the SQL's and the table's own).
_NEW_ROW_DEFAULTS = {
    "state": "scheduled",
    "attempts": 0,
    "lease_expires_at": None,
    "leased_by": None,
    "last_error": None,
    "finished_at": None,
}
# A job's JSON columns, in this order wherever they come back from an insert (`RETURNING`).
JSON_COLUMNS = ("target", "payload", "metadata")
_INSERTED_AT = {name: i for i, name in enumerate(INSERT_COLUMNS)}
# Per job column: its index in the insert's values, or None and the value it starts with.
_JOB_COLUMN_SOURCES: tuple[tuple[int | None, Any], ...] = tuple(
    (None, _NEW_ROW_DEFAULTS[name]) if name in _NEW_ROW_DEFAULTS else (_INSERTED_AT[name], None)
    for name in JOB_COLUMNS
)
_JSON_AT = tuple(JOB_COLUMNS.index(name) for name in JSON_COLUMNS)
_INSERTED_JSON_AT = tuple(_INSERTED_AT[name] for name in JSON_COLUMNS)


def inserted_json(values: Sequence[Any]) -> tuple[Any, ...]:
    """The `JSON_COLUMNS` of an insert's `values` (a `JobEncoder.row`), as it sent them."""
    return tuple(values[i] for i in _INSERTED_JSON_AT)


def inserted_row(values: Sequence[Any], json_read: Sequence[Any]) -> list[Any]:
    """The row in `JOB_COLUMNS` order that an insert of `values` (a `JobEncoder.row`) made, with
    its `JSON_COLUMNS` as the database read them back (`json_read`: PostgreSQL's jsonb has its
    own numbers and key order): what a `RETURNING {job_columns}` would have returned."""
    row = [default if index is None else values[index] for index, default in _JOB_COLUMN_SOURCES]
    for at, value in zip(_JSON_AT, json_read, strict=True):
        row[at] = value
    return row


# Cursors: `{created_at µs}:{id}` of the last item of a page. Any text of that shape is a
# position in the (created_at, id) order, so any is accepted (a made-up one starts a page at
# its position), and the API states the format as one pattern (`CURSOR_PATTERN`). The id may
# hold any character but NUL (ids are far shorter than 400); 17 digits of microseconds reach
# past year 5000, inside what `datetime` holds.

CURSOR_PATTERN = r"^[0-9]{1,17}:[^\x00]{1,400}$"
_CURSOR = re.compile(CURSOR_PATTERN)


def encode_cursor(created_at: datetime, item_id: str) -> str:
    return f"{micros(created_at)}:{item_id}"


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    if not _CURSOR.fullmatch(cursor):
        raise InvalidInput(
            "cursor", cursor, "expected a cursor from a previous page (`{microseconds}:{id}`)"
        )
    created_us, item_id = cursor.split(":", 1)
    return from_micros(int(created_us)), item_id


# A page of a run log ends at an attempt; attempts stop at the schema's ceiling (100 and a
# rescue's one more), far inside 9 digits.
RUN_CURSOR_PATTERN = r"^[0-9]{1,9}$"
_RUN_CURSOR = re.compile(RUN_CURSOR_PATTERN)


def decode_run_cursor(cursor: str) -> int:
    """The last attempt of the previous page of a run log."""
    if not _RUN_CURSOR.fullmatch(cursor):
        raise InvalidInput(
            "cursor", cursor, "expected a cursor from a previous page of runs (an attempt number)"
        )
    return int(cursor)


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
        "metadata": dumps(schedule.metadata),
        "start_at": None if schedule.start_at is None else instant(schedule.start_at),
        "end_at": None if schedule.end_at is None else instant(schedule.end_at),
        "flow": None if schedule.flow is None else dumps(schedule.flow.to_dict()),
        "traceparent": None if schedule.trace is None else schedule.trace.traceparent,
        "tracestate": None if schedule.trace is None else schedule.trace.tracestate,
    }
