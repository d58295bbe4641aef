"""Rows back into the job scheduler's records (jobs, runs, tenants, schedules), in the column
orders of `job_rows`, with the caches that keep decoding a claimed batch cheap. Instants go
through the backend's codec, given as an argument."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from recoup.errors import InvalidInput
from recoup.jobs.flow import DEFAULT_FLOW_PERIOD, FlowLimits
from recoup.jobs.model import (
    BackoffPolicy,
    HttpTarget,
    Job,
    JobState,
    PythonTarget,
    Run,
    RunOutcome,
    Target,
    Tenant,
    trusted,
)
from recoup.jobs.schedules.model import AnchorRule, CronRule, MissedPolicy, Rule, Schedule
from recoup.jobs.trace_context import TraceContext
from recoup.storage.job_rows import DecodeInstant
from recoup.tenancy import TenantInfo


def _loads(value: Any) -> Any:
    # SQLite returns JSON as text; psycopg returns jsonb already decoded.
    return json.loads(value) if isinstance(value, str | bytes) else value


def _metadata(value: Any) -> dict[str, str]:
    # Most jobs carry none: skip the JSON parser for the empty object.
    if value is None or value == "{}":
        return {}
    return dict(_loads(value))


# Targets, rules, retry policies and durations


def target_from_dict(data: dict[str, Any]) -> Target:
    """A target from its stored JSON object (`job_rows.target_to_dict`'s shape), built without
    re-validating it (`trusted`: the store wrote what was checked on the way in) and taking the
    decoded headers object as the target's own (`data` is the caller's fresh decoding)."""
    kind = data.get("kind")
    if kind == "http":
        headers = data.get("headers")
        return trusted(
            HttpTarget,
            {
                "url": data["url"],
                "method": data.get("method", "POST"),
                "headers": {} if headers is None else headers,
                "body": data.get("body"),
                "delivery": data.get("delivery", "standard-webhooks"),
                "callback": data.get("callback"),
                "failure_callback": data.get("failure_callback"),
                "kind": "http",
            },
        )
    if kind == "python":
        return PythonTarget(handler=data["handler"])
    raise InvalidInput("target.kind", kind, "expected 'http' or 'python'")


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


# Decoding a claimed batch builds the same few policies and durations over and over; they are
# immutable, so each distinct value is built (and validated) once.
@functools.lru_cache(maxsize=256)
def retry_from_values(max_attempts: int, min_s: float, max_s: float, jitter: Any) -> BackoffPolicy:
    return BackoffPolicy(
        max_attempts=max_attempts,
        min_backoff=timedelta(seconds=min_s),
        max_backoff=timedelta(seconds=max_s),
        jitter=bool(jitter),
    )


@functools.lru_cache(maxsize=256)
def duration(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


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
        metadata,
        flow_key,
        flow_rate,
        flow_period_s,
        flow_parallelism,
        flow_order,
        traceparent,
        tracestate,
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
            "metadata": _metadata(metadata),
            "flow_key": flow_key if flow_order is None else None,
            "flow_rate": flow_rate,
            "flow_period": DEFAULT_FLOW_PERIOD
            if flow_period_s is None
            else duration(flow_period_s),
            "flow_parallelism": flow_parallelism if flow_order is None else None,
            "ordering_key": None if flow_order is None else flow_key,
            "ordering_skip_failed": flow_order == "skip",
            "trace": None if traceparent is None else TraceContext(traceparent, tracestate),
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
    """A row of the `get_tenant` query."""
    id_, name, signing_secret, created_at, disabled_at, previous, previous_until = row
    return Tenant(
        id=id_,
        name=name,
        signing_secret=signing_secret,
        created_at=instant(created_at),
        disabled_at=None if disabled_at is None else instant(disabled_at),
        previous_signing_secret=previous,
        previous_secret_until=None if previous_until is None else instant(previous_until),
    )


def tenant_info_from_row(row: Sequence[Any], instant: DecodeInstant) -> TenantInfo:
    """A row of `id, name, created_at, disabled_at, previous_secret_until, secret_prefix`
    (the `list_tenants` query)."""
    return TenantInfo(
        id=row[0],
        name=row[1],
        created_at=instant(row[2]),
        disabled_at=None if row[3] is None else instant(row[3]),
        rotating_until=None if row[4] is None else instant(row[4]),
        secret_prefix=row[5],
    )


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
        metadata,
        start_at,
        end_at,
        revision,
        flow,
        traceparent,
        tracestate,
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
        metadata=_metadata(metadata),
        start_at=None if start_at is None else instant(start_at),
        end_at=None if end_at is None else instant(end_at),
        revision=revision,
        flow=None if flow is None else FlowLimits.from_dict(_loads(flow)),
        trace=None if traceparent is None else TraceContext(traceparent, tracestate),
    )
