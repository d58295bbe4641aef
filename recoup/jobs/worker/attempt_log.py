"""The attempt log line: one record per attempt written, on the `recoup.attempts` logger, with
the job's tenant, id, name, attempt number and outcome as fields (`recoup.logs` prints them).
A final failure is a warning; a success or a retry is info."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from recoup.jobs.model import Completion, Job, RunOutcome

log = logging.getLogger("recoup.attempts")
_LINE = 0  # the records' line number: they name this module and function, not a line


def log_attempts(jobs: Sequence[Job], completions: Sequence[Completion]) -> None:
    """Log each written completion beside the job it completes (same order)."""
    info = log.isEnabledFor(logging.INFO)
    if not info and not log.isEnabledFor(logging.WARNING):
        return
    for job, completion in zip(jobs, completions, strict=True):
        run = completion.run
        failed = run.outcome is RunOutcome.FAILED
        if not failed and not info:
            continue
        fields: dict[str, Any] = {
            "tenant": job.tenant,
            "job_id": job.id,
            "job_name": job.name,
            "attempt": run.attempt,
            "outcome": run.outcome.value,
            "status_code": run.status_code,
            "duration_ms": round(run.duration_ms, 1),
            "worker_id": completion.worker_id,
        }
        if completion.retry_at is not None:
            fields["retry_at"] = completion.retry_at
        if run.error:
            fields["error"] = run.error
        # The record made and handed to the handlers as `log.log` would, but without its
        # search of the stack for the caller (a third of a line's cost): it is always here.
        log.handle(
            log.makeRecord(
                log.name,
                logging.WARNING if failed else logging.INFO,
                __file__,
                _LINE,
                "job %s attempt %d: %s",
                (job.name or job.id, run.attempt, run.outcome.value),
                None,
                func="log_attempts",
                extra=fields,
            )
        )


__all__ = ["log_attempts"]
