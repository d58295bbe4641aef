"""Success and failure callbacks: the job that reports another job's end to the URL its target
names (`HttpTarget.callback`, `HttpTarget.failure_callback`). Pure: the job, its last run and
the state it ends in are arguments.

When a job ends, succeeded or failed for good after its last attempt, the worker attaches the
report to the attempt's completion (`Completion.callback`) and the store inserts it in the same
transaction as the job's final state: a crash cannot lose it, and no retried completion can make
a second one (its idempotency key, `callback:{job id}:{attempt}`, is unique per tenant, and the
completion applies by compare-and-set). The report is an ordinary HTTP job, durable, retried
with backoff and signed like every delivery; its own end reports nothing further (its target has
no callbacks). A cancelled job reports nothing. Every report of a job is in the group
`callback:{job id}` (`callback_group`), so `GET /v1/jobs?group=callback:{id}` finds them (a job
redriven after failing, `JobStore.redrive`, may end, and report, more than once).

Two shapes of body, after the source job's delivery:

- **standard-webhooks** (jobs of /v1 and the Python API): `type` (`job.succeeded` or
  `job.failed`), `job_id`, `name`, `schedule_id`, `group`, `url`, `state`, `attempts`,
  `status_code`, `error`, `response_excerpt` (the start of the last response) and
  `finished_at` (RFC 3339);
- **qstash** (messages published through the QStash-compatible API): QStash's callback body
  (upstash.com/docs/qstash/features/callbacks): `status`, `header`, `body` (base64),
  `retried`, `maxRetries`, `sourceMessageId`, `url`, `method`, `sourceHeader`, `sourceBody`
  (base64), `notBefore`, `createdAt`, `scheduleId`, and `dlqId` on a failure. Recoup keeps the
  start of a response only (`RESPONSE_EXCERPT_LIMIT` characters) and not its headers: `body` is
  that start and `header` is empty; `status` is null when no response arrived (a timeout, a
  refused connection); `notBefore` is the last attempt's due instant.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any, Final

from recoup.jobs.model import DEFAULT_RETRY, HttpTarget, Job, JobState, NewJob, Run

CALLBACK_GROUP_PREFIX: Final = "callback:"


def callback_group(job_id: str) -> str:
    """The group of the jobs that report the end of job `job_id`."""
    return CALLBACK_GROUP_PREFIX + job_id


def callback_url(target: HttpTarget, state: JobState) -> str | None:
    """Where an end in `state` is reported: `callback` for succeeded, `failure_callback` for
    failed, nothing for any other state."""
    if state is JobState.SUCCEEDED:
        return target.callback
    if state is JobState.FAILED:
        return target.failure_callback
    return None


def callback_job(job: Job, run: Run, *, state: JobState) -> NewJob | None:
    """The job that reports `job`'s end in `state` after its attempt `run` (due at the run's
    end), or None when the target has no callback for that state."""
    target = job.target
    if not isinstance(target, HttpTarget):
        return None
    url = callback_url(target, state)
    if url is None:
        return None
    if target.delivery == "qstash":
        body: Any = qstash_body(job, run, state=state)
    else:
        body = standard_body(job, run, state=state)
    return NewJob(
        run_at=run.finished_at,
        target=HttpTarget(url=url, method="POST", body=body, delivery=target.delivery),
        tenant=job.tenant,
        name=f"callback-{state.value}-{job.name or job.id}"[:200],
        idempotency_key=f"{CALLBACK_GROUP_PREFIX}{job.id}:{run.attempt}",
        retry=DEFAULT_RETRY,
        keep_for=job.keep_for,
        group=callback_group(job.id),
    )


def standard_body(job: Job, run: Run, *, state: JobState) -> dict[str, Any]:
    """The report of a /v1 job's end (see the module's docstring)."""
    target = job.target
    assert isinstance(target, HttpTarget)
    return {
        "type": f"job.{state.value}",
        "job_id": job.id,
        "name": job.name,
        "schedule_id": job.schedule_id,
        "group": job.group,
        "url": target.url,
        "state": state.value,
        "attempts": run.attempt,
        "status_code": run.status_code,
        "error": run.error,
        "response_excerpt": run.response_excerpt,
        "finished_at": run.finished_at.isoformat(),
    }


def qstash_body(job: Job, run: Run, *, state: JobState) -> dict[str, Any]:
    """QStash's callback body for a message's end (see the module's docstring)."""
    target = job.target
    assert isinstance(target, HttpTarget)
    body: dict[str, Any] = {
        "status": run.status_code,
        "header": {},
        "body": _base64(run.response_excerpt or ""),
        "retried": max(run.attempt - 1, 0),
        "maxRetries": job.retry.max_attempts - 1,
        "sourceMessageId": job.id,
        "url": target.url,
        "method": target.method,
        "sourceHeader": {name: [value] for name, value in target.headers.items()},
        "sourceBody": _base64(_text(target.body)),
        "notBefore": _ms(job.run_at),
        "createdAt": _ms(job.created_at),
    }
    if job.schedule_id is not None:
        body["scheduleId"] = job.schedule_id
    if state is JobState.FAILED:
        body["dlqId"] = job.id  # the QStash DLQ's id of a failed message is its id
    return body


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _base64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _ms(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


__all__ = [
    "CALLBACK_GROUP_PREFIX",
    "callback_group",
    "callback_job",
    "callback_url",
    "qstash_body",
    "standard_body",
]
