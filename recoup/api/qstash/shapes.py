"""Recoup's jobs and schedules as QStash's JSON (the fields the `qstash` SDK's parsers read:
`parse_message_response`, `parse_schedule_response`), and the request pieces both the publish
and the schedule routes share: the destination URL, the body text and the QStash target."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from starlette.responses import JSONResponse, Response

from recoup.api.qstash import flow_control
from recoup.api.qstash.headers import refuse
from recoup.jobs.model import HttpTarget, Job, Target
from recoup.jobs.schedules.model import CronRule, Schedule

GROUP: Final = "qstash"  # the job group of published messages (cancel-all cancels it)


def answer(status: int, content: Any) -> Response:
    """QStash's answers are plain JSON (errors stay problem+json, which the SDK shows as is)."""
    return JSONResponse(content, status_code=status)


def ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


def destination_url(path: str, query: str) -> str:
    """The destination as the SDK sends it: the raw URL appended to the path (its query string
    arrives as the request's). A URL group or an API name is refused by name."""
    url = f"{path}?{query}" if query else path
    if not url.startswith(("http://", "https://")):
        raise refuse(
            "destination",
            url,
            "expected an http:// or https:// URL (URL groups and APIs are not supported)",
            slug="unsupported-destination",
        )
    return url


def body_text(raw: bytes) -> str | None:
    """The body as stored and signed: UTF-8 text, or None when empty."""
    if not raw:
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise refuse(
            "body", raw[:40], "expected UTF-8 text (binary bodies are not supported)"
        ) from None


def qstash_target(
    url: str,
    method: str,
    headers: dict[str, str],
    body: str | None,
    callbacks: tuple[str | None, str | None] = (None, None),
) -> HttpTarget:
    """A destination delivered the QStash way; `callbacks`: `Upstash-Callback` and
    `Upstash-Failure-Callback` (`headers.callbacks`)."""
    return HttpTarget(
        url=url,
        method=method,
        headers=headers,
        body=body,
        delivery="qstash",
        callback=callbacks[0],
        failure_callback=callbacks[1],
    )


def _callbacks_json(target: HttpTarget) -> dict[str, str]:
    found = {}
    if target.callback is not None:
        found["callback"] = target.callback
    if target.failure_callback is not None:
        found["failureCallback"] = target.failure_callback
    return found


def is_qstash(target: Target) -> bool:
    return isinstance(target, HttpTarget) and target.delivery == "qstash"


def _header_lists(target: HttpTarget) -> dict[str, list[str]]:
    return {name: [value] for name, value in target.headers.items()}


def message_json(job: Job) -> dict[str, Any]:
    """A QStash message; `state` is Recoup's own (scheduled, running, succeeded, failed,
    cancelled), an extra field the SDK ignores."""
    target = job.target
    assert isinstance(target, HttpTarget)
    found: dict[str, Any] = {
        "messageId": job.id,
        "url": target.url,
        "method": target.method,
        "header": _header_lists(target),
        "maxRetries": job.retry.max_attempts - 1,
        "notBefore": ms(job.run_at),
        "createdAt": ms(job.created_at),
        "state": job.state.value,
        **_callbacks_json(target),
        **flow_control.message_fields(job),
    }
    if isinstance(target.body, str):
        found["body"] = target.body
    if job.schedule_id is not None:
        found["scheduleId"] = job.schedule_id
    return found


def cron_text(rule: CronRule) -> str:
    """QStash's cron: the expression, prefixed `CRON_TZ=<zone> ` outside UTC."""
    if rule.timezone == "UTC":
        return rule.expression
    return f"CRON_TZ={rule.timezone} {rule.expression}"


def schedule_json(schedule: Schedule) -> dict[str, Any]:
    target = schedule.target
    assert isinstance(target, HttpTarget)
    assert isinstance(schedule.rule, CronRule)
    found: dict[str, Any] = {
        "scheduleId": schedule.id,
        "destination": target.url,
        "cron": cron_text(schedule.rule),
        "createdAt": ms(schedule.created_at),
        "method": target.method,
        "header": _header_lists(target),
        "retries": schedule.retry.max_attempts - 1,
        "timeout": int(schedule.timeout.total_seconds()),
        "isPaused": schedule.paused,
        **_callbacks_json(target),
        **flow_control.schedule_fields(schedule.flow),
    }
    if isinstance(target.body, str):
        found["body"] = target.body
    if schedule.next_fire_at is not None and not schedule.paused:
        found["nextScheduleTime"] = ms(schedule.next_fire_at)
    return found


__all__ = [
    "GROUP",
    "answer",
    "body_text",
    "cron_text",
    "destination_url",
    "is_qstash",
    "message_json",
    "qstash_target",
    "schedule_json",
]
