"""One attempt of a Python handler (async, or sync in a thread; inline ones on the loop): the
handler's return or exception as the `AttemptResult` the worker writes, a missing handler as a
retry the operator hears of, and the attempt's timeout."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from recoup.jobs.handlers import HandlerContext, HandlerRegistry, PermanentError
from recoup.jobs.model import RESPONSE_EXCERPT_LIMIT, Job
from recoup.jobs.targets import (
    SUCCEEDED,
    AttemptOutcome,
    AttemptResult,
    HttpExecutor,
    bounded,
    describe,
    ms_since,
    timed_out,
)

log = logging.getLogger("recoup.worker")


def handler_context(job: Job, http: Callable[[], HttpExecutor] | None = None) -> HandlerContext:
    return HandlerContext(
        job_id=job.id,
        tenant=job.tenant,
        name=job.name,
        attempt=job.attempts,
        payload=job.payload,
        idempotency_key=job.idempotency_key,
        run_at=job.run_at,
        http=http,
    )


def result_of_return(value: Any, started: float) -> AttemptResult:
    if value is None:
        return AttemptResult(AttemptOutcome.SUCCEEDED, duration_ms=ms_since(started))
    return AttemptResult(
        AttemptOutcome.SUCCEEDED,
        duration_ms=ms_since(started),
        response_excerpt=bounded(str(value), RESPONSE_EXCERPT_LIMIT),
    )


def result_of_exception(exc: BaseException, started: float) -> AttemptResult:
    outcome = AttemptOutcome.FAILED if isinstance(exc, PermanentError) else AttemptOutcome.RETRY
    return AttemptResult(outcome, duration_ms=ms_since(started), error=describe(exc))


def missing_handler(name: str, job: Job) -> AttemptResult:
    error = f"no handler named {name!r} is registered in this worker"
    # Retried (another deploy may have it), but an operator must hear of it at once.
    log.warning("%s: job %s will be retried", error, job.name or job.id, extra=_ids(job))
    return AttemptResult(AttemptOutcome.RETRY, error=error)


def _ids(job: Job) -> dict[str, Any]:
    return {"tenant": job.tenant, "job_id": job.id, "job_name": job.name, "attempt": job.attempts}


async def run_handler(
    registry: HandlerRegistry,
    name: str,
    job: Job,
    *,
    bounded: bool = True,
    http: Callable[[], HttpExecutor] | None = None,
) -> AttemptResult:
    """One attempt of a Python handler (async, or sync in a thread). Never raises for the
    handler's failures; cancellation propagates.

    `job.timeout` bounds the attempt (a retryable "timed out after N s" when it runs out): an
    async handler is cancelled there; a sync handler's thread cannot be stopped, so the worker
    stops waiting for it and the thread runs on, unobserved, until the handler returns (it
    keeps one of the loop's default-executor threads, and the process does not exit before it
    returns). An inline handler runs on the loop and cannot be interrupted: the timeout does
    not apply to it (see `HandlerRegistry.add`). `bounded=False` leaves an async handler's
    timeout to the caller (the worker's consumers enforce it without a timer per attempt).
    `http` is the worker session's HTTP client, handed to the handler (`HandlerContext.http`)."""
    registered = registry.get(name)
    if registered is None:
        return missing_handler(name, job)
    ctx = handler_context(job, http)
    started = time.perf_counter()
    if registered.inline or (registered.is_async and not bounded):
        try:
            value = await registered.fn(ctx) if registered.is_async else registered.fn(ctx)
        except Exception as exc:
            return result_of_exception(exc, started)
        return result_of_return(value, started)
    deadline = asyncio.timeout(job.timeout.total_seconds())
    try:
        async with deadline:
            if registered.is_async:
                value = await registered.fn(ctx)
            else:
                value = await asyncio.to_thread(registered.fn, ctx)
    except Exception as exc:
        if deadline.expired():  # ours, not a TimeoutError the handler raised itself
            return timed_out(job, started)
        return result_of_exception(exc, started)
    if deadline.expired():  # the handler swallowed the cancellation and returned late
        return timed_out(job, started)
    return result_of_return(value, started)


def run_inline(registry: HandlerRegistry, name: str, job: Job) -> AttemptResult | None:
    """Run an inline (sync, cheap) handler right here; None if `name` is not inline."""
    registered = registry.get(name)
    if registered is None or not registered.inline:
        return None
    started = time.perf_counter()
    try:
        value = registered.fn(handler_context(job))
    except Exception as exc:
        return result_of_exception(exc, started)
    if value is None:
        return SUCCEEDED  # the common no-op case: no allocation, no timing
    return result_of_return(value, started)


__all__ = [
    "handler_context",
    "missing_handler",
    "result_of_exception",
    "result_of_return",
    "run_handler",
    "run_inline",
]
