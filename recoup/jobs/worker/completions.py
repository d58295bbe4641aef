"""Completions: the pure rule that turns an attempt's result into the `Completion` to write, and
the buffer that writes them in batches (one `complete_many` call each)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from recoup.jobs.backoff import backoff_delay
from recoup.jobs.callbacks import callback_job
from recoup.jobs.model import Completion, HttpTarget, Job, JobState, Run, RunOutcome, trusted
from recoup.jobs.store import latest_per_job
from recoup.jobs.targets import AttemptOutcome, AttemptResult
from recoup.jobs.worker.attempt_log import log_attempts
from recoup.jobs.worker.clocks import Elapsed, sleep
from recoup.jobs.worker.ledger import Held, Ledger, WorkerStats

log = logging.getLogger("recoup.worker")

ERROR_PAUSE = 1.0  # seconds: the longest pause between retries of a failed flush
FLUSH_RETRY_PAUSE = 0.05  # seconds before the first retry of a failed flush (then doubling)
MAX_HOLD = 0.25  # seconds a flush may wait for attempts queued to start (`CompletionBuffer.hold`)


def completion_for(
    job: Job,
    result: AttemptResult,
    *,
    started_at: datetime,
    finished_at: datetime,
    worker_id: str,
    rng: random.Random,
) -> Completion:
    """The completion to write for `job`'s attempt (the job as claimed: `job.attempts` is this
    attempt's number) that ended at `finished_at` (due time) with `result`: SUCCEEDED; RETRY at
    `finished_at` + the backoff (jitter drawn from `rng`, `Retry-After` honoured) while
    attempts remain; FAILED otherwise, a spent RETRY saying so in its error; with the job that
    reports its end to the target's callback URL, if any (`recoup.jobs.callbacks`). No I/O."""
    retry_at: datetime | None = None
    error = result.error
    if result.outcome is AttemptOutcome.SUCCEEDED:
        outcome = RunOutcome.SUCCEEDED
    elif result.outcome is AttemptOutcome.RETRY and job.attempts < job.retry.max_attempts:
        outcome = RunOutcome.RETRY
        delay = backoff_delay(job.retry, job.attempts, rng=rng, retry_after=result.retry_after)
        retry_at = finished_at + delay
    else:
        outcome = RunOutcome.FAILED
        if result.outcome is AttemptOutcome.RETRY:
            error = f"{error} (attempts spent: {job.attempts} of {job.retry.max_attempts})"
    fields: dict[str, Any] = {
        "job_id": job.id,
        "tenant": job.tenant,
        "attempt": job.attempts,
        "started_at": started_at,
        "finished_at": finished_at,
        "outcome": outcome,
        "status_code": result.status_code,
        "duration_ms": result.duration_ms,
        "response_excerpt": result.response_excerpt,
        "error": error,
        "worker_id": worker_id,
    }
    # The instants come from the due clock; a clock handing out naive ones is refused by the
    # validating constructor, every other run skips re-validation (one per attempt).
    if started_at.tzinfo is None or finished_at.tzinfo is None:
        run = Run(**fields)
    else:
        run = trusted(Run, fields)
    callback = None
    target = job.target
    # Only jobs with a callback pay for one: the check is two attribute reads.
    if isinstance(target, HttpTarget) and (target.callback or target.failure_callback):
        # A RETRY carries the failure report too: the store applies it only if the job ends
        # with this attempt (its attempts spent), never when it is retried.
        ends = JobState.SUCCEEDED if outcome is RunOutcome.SUCCEEDED else JobState.FAILED
        callback = callback_job(job, run, state=ends)
    return trusted(
        Completion,
        {"run": run, "worker_id": worker_id, "retry_at": retry_at, "callback": callback},
    )


class Ended(NamedTuple):
    """An attempt that ended, its completion not written yet."""

    held: Held
    result: AttemptResult
    started_at: datetime
    finished_at: datetime


def latest_attempts(ended: list[Ended]) -> list[Ended]:
    """At most one per job: its latest attempt (the rule of `JobStore.complete_many`)."""
    return latest_per_job(ended, _job_attempt)


def _job_attempt(ended: Ended) -> tuple[str, int]:
    return ended.held.job.id, ended.held.job.attempts


class CompletionBuffer:
    """Ended attempts queue in memory (`add`); `flush_loop` writes them with one
    `complete_many` call as soon as `flush_size` are waiting or `flush_interval` after the
    first one, whichever comes first; a flush in flight lets the next batch grow meanwhile.
    A failed write keeps its batch and is tried again (the leases cover the delay). Attempts
    given up with the worker's session (`Held.abandoned`) are dropped unwritten.

    `on_attempt(job, run)` observes each written attempt but revoked ones, right after its
    batch was written; its exceptions are logged and ignored."""

    def __init__(
        self,
        *,
        complete_many: Callable[[Sequence[Completion]], Awaitable[object]],
        ledger: Ledger,
        elapsed: Elapsed,
        rng: random.Random,
        worker_id: str,
        flush_size: int,
        flush_interval: float,
        on_attempt: Callable[[Job, Run], None] | None,
        written: Callable[[], None],
    ) -> None:
        self._complete_many = complete_many
        self._ledger = ledger
        self._stats: WorkerStats = ledger.stats
        self._elapsed = elapsed
        self._rng = rng
        self._worker_id = worker_id
        self._flush_size = flush_size
        self._flush_interval = flush_interval
        self.on_attempt = on_attempt
        self._written = written  # called after each batch: room to claim more
        # While true, the flush loop lets the event loop run queued attempts first (up to
        # MAX_HOLD): a burst's starts then do not wait behind its first completions' writing.
        self.hold: Callable[[], bool] = lambda: False
        self._ended: list[Ended] = []
        self._wanted: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None

    def open(self) -> None:
        """Bind to the session's event loop."""
        self._wanted = asyncio.Event()
        self._lock = asyncio.Lock()

    def add(
        self, held: Held, result: AttemptResult, started_at: datetime, finished_at: datetime
    ) -> None:
        """Queue an ended attempt (`finished_at`: when it ended, in due time)."""
        self._ended.append(Ended(held, result, started_at, finished_at))
        assert self._wanted is not None
        self._wanted.set()

    async def flush_loop(self) -> None:
        assert self._wanted is not None
        pause = FLUSH_RETRY_PAUSE
        while True:
            await self._wanted.wait()
            if len(self._ended) < self._flush_size:
                await sleep(self._elapsed, self._flush_interval)  # let the batch grow a little
            held_since = self._elapsed.monotonic()
            while self.hold() and self._elapsed.monotonic() - held_since < MAX_HOLD:
                await asyncio.sleep(0)  # a consumer runs its next streak of attempts
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("worker %s: writing completions failed; retrying", self._worker_id)
                # The batch is queued again: try again after a pause (doubling up to
                # ERROR_PAUSE) even if no other completion comes to ask for a flush.
                await sleep(self._elapsed, pause)
                pause = min(2 * pause, ERROR_PAUSE)
                self._wanted.set()
            else:
                pause = FLUSH_RETRY_PAUSE

    async def flush(self) -> None:
        """Write every queued completion (one `complete_many` call per batch)."""
        assert self._lock is not None and self._wanted is not None
        async with self._lock:
            while self._ended:
                ended, self._ended = self._ended, []
                self._wanted.clear()
                batch = latest_attempts(self._keep(ended))
                if not batch:
                    continue
                completions = [
                    completion_for(
                        e.held.job,
                        e.result,
                        started_at=e.started_at,
                        finished_at=e.finished_at,
                        worker_id=self._worker_id,
                        rng=self._rng,
                    )
                    for e in batch
                ]
                began = self._elapsed.monotonic()
                try:
                    await self._complete_many(completions)
                except BaseException:
                    self._ended[:0] = batch  # keep them for the next try; leases cover us
                    raise
                self._stats.flush_seconds += self._elapsed.monotonic() - began
                self._stats.flushes += 1
                for e, completion in zip(batch, completions, strict=True):
                    self._count(completion.run.outcome)
                    self._ledger.forget(e.held)
                log_attempts([e.held.job for e in batch], completions)
                if self.on_attempt is not None:  # one test per batch when nobody observes
                    self._report(batch, completions)
                self._written()

    def _keep(self, ended: list[Ended]) -> list[Ended]:
        """The attempts to write: not those given up with the worker's session (their jobs
        are handed back as lost; a completion would spend their attempts)."""
        if not any(e.held.abandoned for e in ended):
            return ended
        for e in ended:
            if e.held.abandoned:
                self._ledger.forget(e.held)
        return [e for e in ended if not e.held.abandoned]

    def _count(self, outcome: RunOutcome) -> None:
        if outcome is RunOutcome.SUCCEEDED:
            self._stats.succeeded += 1
        elif outcome is RunOutcome.RETRY:
            self._stats.retried += 1
        else:
            self._stats.failed += 1

    def _report(self, batch: list[Ended], completions: list[Completion]) -> None:
        observe = self.on_attempt
        assert observe is not None
        for e, completion in zip(batch, completions, strict=True):
            if e.held.revoked:
                continue
            try:
                observe(e.held.job, completion.run)
            except Exception:  # an observer's bug must not stop the worker or lose a batch
                log.exception("worker %s: on_attempt failed", self._worker_id)


__all__ = ["CompletionBuffer", "Ended", "completion_for", "latest_attempts"]
