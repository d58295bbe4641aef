"""Running attempts: HTTP targets and Python handlers (inline, in a thread, or on consumer
tasks), each bounded by its job's timeout, its end queued as a completion."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime

from recoup.jobs.flow import START_TOLERANCE
from recoup.jobs.handler_attempts import run_handler, run_inline
from recoup.jobs.handlers import HandlerRegistry
from recoup.jobs.model import HttpTarget, PythonTarget
from recoup.jobs.targets import (
    AttemptOutcome,
    AttemptResult,
    HttpExecutor,
    describe,
    timed_out,
)
from recoup.jobs.worker.clocks import Elapsed, Timer
from recoup.jobs.worker.completions import CompletionBuffer
from recoup.jobs.worker.ledger import INTERRUPTED, READY, REVOKED, RUNNING, Held, Ledger
from recoup.jobs.worker.secret_cache import SecretCache

log = logging.getLogger("recoup.worker")

CONSUMER_STREAK = 64  # attempts a consumer runs back to back before yielding to the loop


class Runner:
    """Starts attempts (`start`) within `concurrency` and ends them (`finish`): the completion
    is queued and the slot goes to the next job whose instant has come.

    HTTP targets and async handlers run on consumer tasks (`_consume`); sync handlers as a task
    each, in a thread, or inline on the loop when registered `inline=True` (no task, no thread:
    the no-op path). Every attempt but an inline one is bounded by the job's `timeout` (a sync
    handler's by `run_handler`; those on consumers by one elapsed-time timer for all,
    `_time_out_attempts`): past it, it is cancelled (a sync handler's thread is left to finish
    unobserved) and retried.

    `pin`, set for a test clock's batch (`Worker.run_batch`), runs each attempt at its job's
    own instant: the due clock reads `run_at` inside the attempt (`VirtualClock.pinned`), and
    the run starts and ends then."""

    def __init__(
        self,
        *,
        handlers: HandlerRegistry,
        ledger: Ledger,
        buffer: CompletionBuffer,
        secrets: SecretCache,
        http: Callable[[], HttpExecutor],
        concurrency: int,
        worker_id: str,
        now: Callable[[], datetime],
        elapsed: Elapsed,
    ) -> None:
        self.handlers = handlers
        self._ledger = ledger
        # Gives back a rate-limited job whose start came too late after its slot (`Firing`).
        self.late: Callable[[Held], None] | None = None
        self._buffer = buffer
        self._secrets = secrets
        self._http = http
        self._concurrency = concurrency
        self._worker_id = worker_id
        self._now = now
        self._elapsed = elapsed
        # Started attempts (HTTP targets, async Python handlers) waiting for a consumer, the
        # consumers alive, and how many of them are not awaiting an attempt.
        self._runq: deque[Held] = deque()
        self.consumers: set[asyncio.Task[None]] = set()
        self._free = 0
        self._timeouts: Timer | None = None  # see `_time_out_attempts`
        self._timeouts_at = math.inf  # the elapsed time it fires at
        self.pin: Callable[[datetime], AbstractContextManager[None]] | None = None

    def close(self) -> None:
        """The session ends: its timer goes (the next session arms anew)."""
        if self._timeouts is not None:
            self._timeouts.cancel()
        self._timeouts, self._timeouts_at = None, math.inf

    def has_queued(self) -> bool:
        """Whether started attempts (HTTP, async handlers) wait for a consumer to run them."""
        return bool(self._runq)

    def running_tasks(self) -> set[asyncio.Task[None]]:
        """The tasks running attempts now (consumers included): the ones a stop waits for."""
        tasks = {h.task for h in self._ledger.held.values() if h.state is RUNNING and h.task}
        return tasks | self.consumers  # they end once the attempts they run and hold are done

    def start(self, held: Held) -> None:
        job = held.job
        if job.flow_rate is not None and self.late is not None:
            # A rate's slots hold only if each starts within the tolerance of its slot
            # (`recoup.jobs.flow`): a later one goes back for a new slot.
            if self._due_now(held) - job.run_at > START_TOLERANCE:
                self.late(held)
                return
        self._ledger.start(held)
        target = job.target
        held.started_at = self._due_now(held)
        if isinstance(target, PythonTarget):
            registered = self.handlers.get(target.handler)
            if registered is None or not registered.is_async:
                with self._at_instant(held):
                    result = run_inline(self.handlers, target.handler, job)
                if result is not None:
                    self.finish(held, result)
                    return
                with self._at_instant(held):  # the task copies the context, pin included
                    held.task = asyncio.get_running_loop().create_task(self._attempt(held))
                return
        # HTTP requests and async handlers: no task of their own, the consumers run them (see
        # `_consume`; an HTTP request's deadline is their one timer's, not the client's own).
        self._runq.append(held)
        if not self._free:
            self._spawn_consumer()

    def finish(self, held: Held, result: AttemptResult) -> None:
        """An attempt ended: queue its completion, give its slot to the next ready job."""
        ledger = self._ledger
        if not ledger.finish(held):
            return
        assert held.started_at is not None
        # A revoked attempt is reported too: the store logs it as cancelled when the job was
        # cancelled during it, and refuses it (logging nothing) when the lease was lost.
        self._buffer.add(held, result, held.started_at, self._due_now(held))
        while ledger.ready and ledger.running < self._concurrency and not ledger.stopping:
            nxt = ledger.ready.popleft()
            if nxt.state is READY:
                self.start(nxt)
        ledger.check_idle()

    def _spawn_consumer(self) -> None:
        self._free += 1
        task = asyncio.get_running_loop().create_task(self._consume(), name="recoup-consumer")
        self.consumers.add(task)
        task.add_done_callback(self.consumers.discard)

    async def _consume(self) -> None:
        """Run started attempts (HTTP requests, async Python handlers) from `_runq`, one after
        another, and end when none is left. A task per attempt costs more than a no-op handler
        (and about 5 % of an HTTP delivery); a few of these carry them instead: one free
        consumer (not awaiting an attempt) is kept whenever attempts wait: a consumer about to
        run an attempt with more queued and none free spawns the next, which takes over if the
        attempt awaits, so an attempt never waits for another one. A burst of 5,000 started at
        once is then carried by a few consumers, not 5,000 tasks (one per attempt while none
        had run yet). There are never more consumers than attempts running plus one. A handler
        runs inside its consumer's task, so `asyncio.timeout` and `current_task` work in it.

        Revoking an attempt cancels its consumer; the consumer reports it interrupted, takes
        the cancellation back (`uncancel`) and goes on. An attempt past its job's timeout is
        cancelled the same way (`_time_out_attempts`, as `asyncio.timeout` would but without a
        timer per attempt) and reported timed out. Any other cancellation (shutdown past its
        grace) ends the consumer, interrupting the attempts still queued too."""
        task = asyncio.current_task()
        assert task is not None
        runq = self._runq
        streak = 0
        try:
            while runq:
                held = runq.popleft()
                self._free -= 1
                if held.state is not RUNNING:  # revoked while queued: release its slot
                    self._free += 1
                    self.finish(held, INTERRUPTED)
                    continue
                if runq and not self._free:
                    # Whoever takes the next attempt while this one's handler awaits.
                    self._spawn_consumer()
                job = held.job
                target = job.target
                held.expires = self._elapsed.monotonic() + job.timeout.total_seconds()
                if held.expires < self._timeouts_at:
                    self._watch_timeouts(held.expires)
                held.task = task
                began = time.perf_counter()  # the run's duration, measured as `targets` does
                try:
                    with self._at_instant(held):
                        if isinstance(target, HttpTarget):
                            secret = await self._secrets.get(job.tenant)
                            result = await self._http().send(job, secret=secret, deadline=False)
                        else:
                            result = await run_handler(
                                self.handlers, target.handler, job, bounded=False, http=self._http
                            )
                except asyncio.CancelledError:
                    held.task = None
                    if held.timed_out and task.uncancel() == 0:  # the timeout's alone
                        self._free += 1
                        self.finish(held, timed_out(job, began))
                        continue
                    revoked = held.state is REVOKED
                    self._free += 1
                    self.finish(held, INTERRUPTED)
                    if revoked and task.uncancel() == 0:
                        continue
                    raise
                except Exception as exc:  # a bug of ours, not the handler's: retry
                    log.exception("worker %s: attempt of job %s crashed", self._worker_id, job.id)
                    result = AttemptResult(AttemptOutcome.RETRY, error=describe(exc))
                held.task = None
                if held.timed_out:  # the handler swallowed its timeout and returned late
                    task.uncancel()
                    result = timed_out(job, began)
                if held.state is REVOKED and task.cancelling():
                    task.uncancel()  # the handler swallowed its revocation
                self._free += 1
                self.finish(held, result)
                streak += 1
                if streak >= CONSUMER_STREAK:  # handlers that never suspend: let others run
                    streak = 0
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            while runq:  # nobody will run these now
                held = runq.popleft()
                self.finish(held, INTERRUPTED)
            raise
        finally:
            self._free -= 1

    def _due_now(self, held: Held) -> datetime:
        return held.job.run_at if self.pin is not None else self._now()

    def _at_instant(self, held: Held) -> AbstractContextManager[None]:
        """The due clock pinned at the job's instant in a test clock's batch, else nothing."""
        return nullcontext() if self.pin is None else self.pin(held.job.run_at)

    def _watch_timeouts(self, when: float) -> None:
        """(Re-)arm the one timer that enforces consumer-run and HTTP attempts' timeouts at
        elapsed time `when`. Attempts do not arm one each: an attempt whose timeout ends after
        the armed instant is found by `_time_out_attempts` when it fires (the no-op path and
        an HTTP request then cost a comparison, not a timer)."""
        if self._timeouts is not None:
            self._timeouts.cancel()
        delay = max(0.0, when - self._elapsed.monotonic())
        self._timeouts = self._elapsed.call_later(delay, self._time_out_attempts)
        self._timeouts_at = when

    def _time_out_attempts(self) -> None:
        """Cancel every consumer-run or HTTP attempt past its timeout (its consumer, or its
        task, reports it timed out), and arm the timer again for the earliest timeout still
        ahead."""
        self._timeouts, self._timeouts_at = None, math.inf
        now = self._elapsed.monotonic()
        ahead = math.inf
        for held in self._ledger.held.values():
            if held.state is not RUNNING or held.task is None or held.expires == math.inf:
                continue  # not running on a consumer nor as an HTTP attempt now
            if held.expires <= now:
                if not held.timed_out:
                    held.timed_out = True
                    held.task.cancel()
            else:
                ahead = min(ahead, held.expires)
        if ahead < math.inf:
            self._watch_timeouts(ahead)

    async def _attempt(self, held: Held) -> None:
        """A sync Python handler's attempt, in a thread (`run_handler` keeps its timeout); a
        revoked one is reported interrupted."""
        job = held.job
        target = job.target
        assert isinstance(target, PythonTarget)
        result: AttemptResult
        try:
            result = await run_handler(self.handlers, target.handler, job, http=self._http)
        except asyncio.CancelledError:
            self.finish(held, INTERRUPTED)
            raise
        except Exception as exc:  # a bug of ours, not the handler's: retry
            log.exception("worker %s: attempt of job %s crashed", self._worker_id, job.id)
            result = AttemptResult(AttemptOutcome.RETRY, error=describe(exc))
        self.finish(held, result)


__all__ = ["CONSUMER_STREAK", "Runner"]
