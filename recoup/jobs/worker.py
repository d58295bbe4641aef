"""The worker: claims due jobs in batches, fires each at its exact instant, runs them
concurrently, and reports completions in batches.

One asyncio loop per worker; every store call runs in a small thread pool, so the loop never
waits on the database. The moving parts:

- **Claim ahead, fire from memory.** The main loop claims jobs due within `horizon` (default
  0.5 s) under a lease, and arms one loop timer per distinct `run_at`: a burst due at one
  instant starts within milliseconds of it instead of at the next poll (DESIGN.md, "Firing on
  the instant").
- **Sleep until something can happen**: the earliest `run_at` the store knows of (minus the
  horizon), the next rescue or materialiser pass, or a notification (`store.wait_for_notify`,
  LISTEN/NOTIFY on PostgreSQL, watched by one dedicated thread), whichever is first; never
  longer than `max_sleep` (1 s), for writers that cannot notify (SQLite in another process).
- **Concurrency.** Up to `concurrency` attempts run at once; jobs whose instant has come wait in
  a FIFO for a slot. Async handlers and HTTP targets run as tasks; sync handlers in a thread,
  or inline on the loop when registered `inline=True` (no task, no thread: the no-op path).
- **Leases.** Every job this worker holds (claimed and not yet reported) is heartbeat in one
  store call every `lease / 3`; a job the store says we no longer hold (cancelled, or rescued
  after a stall) is dropped if not started, and its attempt is interrupted if it is running.
- **Batched completions.** Outcomes queue in memory; one flusher writes them with one
  `complete_many` call as soon as `flush_size` are waiting or `flush_interval` after the first
  one, whichever comes first; a flush in flight lets the next batch grow meanwhile.
- **Rescue, schedules, retention.** Every `lease / 2` the worker rescues expired leases
  (anyone's); every `schedule_interval` it materialises schedule occurrences due within
  `schedule_horizon`; every `prune_interval` it deletes finished jobs past their `keep_for`
  and runs older than `keep_runs_for` (None turns pruning off).
- **Graceful shutdown** (`request_stop()`, wired to SIGTERM/SIGINT by the CLI): stop claiming,
  release claimed jobs not yet started, let running attempts finish for up to `grace`, then
  interrupt the rest (reported as retryable), flush every completion.

Time comes from `clock` (a `VirtualClock` in tests: then drive the worker with
`run_until_idle()`, which claims what is due at the clock's now and runs it to completion).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import random
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import httpx

from recoup.jobs.backoff import backoff_delay
from recoup.jobs.handlers import HandlerRegistry
from recoup.jobs.model import (
    Completion,
    HttpTarget,
    Job,
    PythonTarget,
    Run,
    RunOutcome,
    trusted,
)
from recoup.jobs.schedules import SCHEDULE_HORIZON, materialise
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import ClaimParams, JobStore
from recoup.jobs.targets import (
    AttemptOutcome,
    AttemptResult,
    HttpExecutor,
    describe,
    run_handler,
    run_inline,
)
from recoup.timekeeping.clock import Clock, SystemClock

log = logging.getLogger("recoup.worker")

T = TypeVar("T")

DEFAULT_LEASE = timedelta(seconds=30)
DEFAULT_HORIZON = timedelta(milliseconds=500)  # claim this far ahead; fire from memory
DEFAULT_GRACE = timedelta(seconds=30)  # running attempts may finish this long after stop
MAX_SLEEP = 1.0  # seconds; the longest idle sleep without a notification
MIN_SLEEP = 0.002  # seconds; the shortest idle sleep, so a contended claim cannot spin
ERROR_PAUSE = 1.0  # seconds to wait after a store error before trying again
NOTIFY_WAIT = 0.1  # seconds each `wait_for_notify` call blocks (and stop waits for the listener)
SECRET_TTL = 60.0  # seconds a tenant's signing secret is cached
SCHEDULE_INTERVAL = timedelta(seconds=5)  # how often the materialiser runs
PRUNE_INTERVAL = timedelta(minutes=10)  # how often finished jobs past keep_for are deleted
KEEP_RUNS_FOR = timedelta(days=30)  # run-log retention (kept after their job is deleted)
PRUNE_LIMIT = 10_000  # rows deleted per prune call (each its own short transaction)

_WAITING, _READY, _RUNNING, _DONE, _REVOKED = range(5)
CONSUMER_STREAK = 64  # attempts a consumer runs back to back before yielding to the loop
_INTERRUPTED = AttemptResult(
    AttemptOutcome.RETRY, error="interrupted: the worker stopped, or no longer holds the job"
)


class _Held:
    """A job this worker holds a lease on, from claim until its completion is written."""

    __slots__ = ("job", "started_at", "state", "task")

    def __init__(self, job: Job) -> None:
        self.job = job
        self.state = _WAITING
        self.task: asyncio.Task[None] | None = None
        self.started_at: datetime | None = None


@dataclass
class WorkerStats:
    """Counters since the worker started (read them from the worker's thread)."""

    claimed: int = 0
    started: int = 0
    succeeded: int = 0
    retried: int = 0
    failed: int = 0
    released: int = 0
    revoked: int = 0  # held jobs the store took back (cancelled, or rescued after a stall)
    rescued: int = 0  # expired leases (any worker's) this worker rescued
    pruned_jobs: int = 0
    pruned_runs: int = 0
    flushes: int = 0
    materialised: int = 0  # schedule occurrences turned into jobs
    claim_seconds: float = 0.0  # wall time spent in claim calls
    flush_seconds: float = 0.0  # wall time spent in complete_many calls


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{random.getrandbits(24):06x}"


class Worker:
    """Runs due jobs from `store` (a `JobStore`; when it is also a `ScheduleStore`, schedule
    occurrences are materialised too). See the module docstring for the design.

    `handlers` maps Python targets to functions; `ssrf` guards HTTP targets at send time (the
    default refuses every non-public address); `wall_clock` stamps signatures (real time even
    when `clock` is virtual). `rng` draws backoff jitter (seed it for reproducible tests).

    `on_attempt(job, run)` observes every attempt whose completion this worker wrote (metrics,
    logs): called on the worker's event loop, once per attempt, right after the batch holding
    it was written, with the job as claimed (`job.run_at` is the instant it was due) and the
    run as reported (a RETRY may be logged as FAILED by the store when attempts are spent).
    Attempts the store took back (revoked) are not reported. It must be quick and must not
    block; an exception it raises is logged and ignored."""

    def __init__(
        self,
        store: JobStore,
        *,
        clock: Clock | None = None,
        handlers: HandlerRegistry | None = None,
        concurrency: int = 100,
        worker_id: str | None = None,
        lease: timedelta = DEFAULT_LEASE,
        horizon: timedelta = DEFAULT_HORIZON,
        batch_size: int = 1000,
        prefetch: int | None = None,
        ssrf: SsrfGuard | None = None,
        http_client: httpx.AsyncClient | None = None,
        wall_clock: Callable[[], datetime] | None = None,
        rng: random.Random | None = None,
        flush_size: int = 500,
        flush_interval: float = 0.005,
        heartbeat_interval: timedelta | None = None,
        rescue_interval: timedelta | None = None,
        schedules: bool = True,
        schedule_horizon: timedelta = SCHEDULE_HORIZON,
        schedule_interval: timedelta = SCHEDULE_INTERVAL,
        grace: timedelta = DEFAULT_GRACE,
        prune_interval: timedelta | None = PRUNE_INTERVAL,
        keep_runs_for: timedelta = KEEP_RUNS_FOR,
        max_sleep: float = MAX_SLEEP,
        store_threads: int = 4,
        on_attempt: Callable[[Job, Run], None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be ≥ 1")
        if batch_size < 1:
            raise ValueError("batch_size must be ≥ 1")
        if lease <= timedelta(0):
            raise ValueError("lease must be positive")
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.handlers = handlers or HandlerRegistry()
        self.concurrency = concurrency
        self.worker_id = worker_id or default_worker_id()
        self.lease = lease
        self.horizon = horizon
        self.batch_size = batch_size
        # Claimed jobs not yet started (waiting for their instant or for a slot).
        self.prefetch = prefetch if prefetch is not None else max(2 * batch_size, concurrency)
        self.ssrf = ssrf or SsrfGuard()
        self._http_client = http_client
        self._wall_clock = wall_clock or SystemClock().now
        self._rng = rng or random.Random()
        self.flush_size = flush_size
        self.flush_interval = flush_interval
        self.heartbeat_interval = heartbeat_interval or lease / 3
        self.rescue_interval = rescue_interval or lease / 2
        self.schedules = schedules and hasattr(store, "due_schedules")
        self.schedule_horizon = schedule_horizon
        self.schedule_interval = schedule_interval
        self.grace = grace
        self.prune_interval = prune_interval
        self.keep_runs_for = keep_runs_for
        self.max_sleep = max_sleep
        self.store_threads = store_threads
        self.on_attempt = on_attempt
        self.stats = WorkerStats()
        self.started = threading.Event()  # set once `run()` is claiming
        self.stopped = threading.Event()  # set once `run()` has shut down

        self._held: dict[str, _Held] = {}
        self._ready: deque[_Held] = deque()
        self._buckets: dict[datetime, list[_Held]] = {}
        self._timers: dict[datetime, asyncio.TimerHandle] = {}
        self._unstarted = 0  # held jobs in _WAITING or _READY
        self._running = 0
        # Started attempts of async Python handlers waiting for a consumer (`_consume`), the
        # consumers alive, and how many of them are not awaiting a handler.
        self._runq: deque[_Held] = deque()
        self._consumers: set[asyncio.Task[None]] = set()
        self._free = 0
        self._done: list[tuple[_Held, AttemptResult, datetime, datetime]] = []
        self._secrets: dict[str, tuple[str | None, float]] = {}
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._http: HttpExecutor | None = None
        self._wake: asyncio.Event | None = None
        self._flush_wanted: asyncio.Event | None = None
        self._flush_lock: asyncio.Lock | None = None
        self._idle: asyncio.Event | None = None
        self._listener_stop = threading.Event()

    # -- public entry points ---------------------------------------------------------------

    async def run(self) -> None:
        """Run until `request_stop()`; then shut down gracefully (see the module docstring)."""
        async with self._session():
            assert self._wake is not None
            tasks = [asyncio.create_task(self._heartbeat_loop(), name="recoup-heartbeat")]
            listener = self._start_listener()
            next_rescue = next_schedules = next_prune = 0.0
            never = float("inf")
            self.started.set()
            try:
                while not self._stopping:
                    try:
                        mono = time.monotonic()
                        if mono >= next_rescue:
                            await self._rescue(self.clock.now())
                            next_rescue = mono + self.rescue_interval.total_seconds()
                        if mono >= next_schedules:
                            if self.schedules:
                                await self._materialise(self.clock.now())
                            next_schedules = (
                                mono + self.schedule_interval.total_seconds()
                                if self.schedules
                                else never
                            )
                        if mono >= next_prune:
                            if self.prune_interval is not None:
                                await self._prune(self.clock.now())
                            next_prune = (
                                mono + self.prune_interval.total_seconds()
                                if self.prune_interval is not None
                                else never
                            )
                        if await self._claim_once():
                            continue  # a full batch: more may be due, claim again at once
                        deadline = min(next_rescue, next_schedules, next_prune)
                        await self._sleep(deadline - time.monotonic())
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("worker %s: store call failed; retrying", self.worker_id)
                        await self._wait_wake(ERROR_PAUSE)
            finally:
                self._listener_stop.set()  # it ends its last wait while we shut down
                await self._shutdown()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                if listener is not None:
                    await asyncio.get_running_loop().run_in_executor(None, listener.join, 2.0)
                self.stopped.set()

    def request_stop(self) -> None:
        """Ask a running worker to shut down gracefully. Safe from any thread or a signal
        handler."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._stopping = True
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self._begin_stop)

    def poke(self) -> None:
        """Wake the worker to look for due jobs now (e.g. after an in-process enqueue). Safe
        from any thread."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    async def run_until_idle(self, *, max_rounds: int = 1_000_000) -> int:
        """Rescue, materialise schedules, then claim and run every job due at `clock.now()`
        until none is left (retries scheduled later than now are not waited for). Returns the
        number of attempts run. For tests, the demo and benchmarks. May be called again after
        it returns (not while `run()` is running)."""
        self._stopping = False
        async with self._session():
            assert self._idle is not None
            heartbeat = asyncio.create_task(self._heartbeat_loop(), name="recoup-heartbeat")
            try:
                return await self._until_idle(max_rounds)
            finally:
                heartbeat.cancel()
                await asyncio.gather(heartbeat, return_exceptions=True)

    async def _until_idle(self, max_rounds: int) -> int:
        assert self._idle is not None
        total = 0
        for _ in range(max_rounds):
            now = self.clock.now()
            await self._rescue(now)
            if self.schedules:
                await self._materialise(now)
            jobs = await self._claim(now, timedelta(0), self.batch_size)
            if not jobs:
                break
            total += len(jobs)
            self._accept(jobs)
            await self._idle.wait()
            await self._flush()
        return total

    def drain(self) -> int:
        """`run_until_idle()` for synchronous callers (not from inside a running loop)."""
        return asyncio.run(self.run_until_idle())

    # -- resources ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[None]:
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(
            max_workers=self.store_threads, thread_name_prefix="recoup-store"
        )
        self._http = HttpExecutor(
            guard=self.ssrf,
            wall_clock=self._wall_clock,
            client=self._http_client,
            max_connections=self.concurrency,
        )
        self._wake = asyncio.Event()
        self._flush_wanted = asyncio.Event()
        self._flush_lock = asyncio.Lock()
        self._idle = asyncio.Event()
        self._idle.set()
        flusher = asyncio.create_task(self._flush_loop(), name="recoup-flusher")
        try:
            yield
        finally:
            await self._flush()
            flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
            await self._http.aclose()
            self._executor.shutdown(wait=True)
            self._loop = None

    async def _call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run a blocking store call in the store thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def _start_listener(self) -> threading.Thread | None:
        wait = getattr(self.store, "wait_for_notify", None)
        if wait is None:
            return None
        loop, wake = self._loop, self._wake
        assert loop is not None and wake is not None
        self._listener_stop.clear()

        def listen() -> None:
            while not self._listener_stop.is_set():
                began = time.monotonic()
                try:
                    notified = bool(wait(NOTIFY_WAIT))
                except Exception:
                    log.warning("worker %s: wait_for_notify failed", self.worker_id, exc_info=True)
                    notified = False
                if notified:
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(wake.set)
                else:
                    # A store without notifications may return at once; do not spin.
                    rest = NOTIFY_WAIT - (time.monotonic() - began)
                    if rest > 0:
                        self._listener_stop.wait(rest)

        thread = threading.Thread(target=listen, name="recoup-notify", daemon=True)
        thread.start()
        return thread

    # -- claiming and firing -----------------------------------------------------------------

    async def _claim_once(self) -> bool:
        """Claim what is due within the horizon, up to the room left; True when a full batch
        came back (so more may be waiting)."""
        room = min(self.batch_size, self.prefetch - self._unstarted)
        if room <= 0:
            return False
        jobs = await self._claim(self.clock.now(), self.horizon, room)
        if jobs:
            self._accept(jobs)
        return len(jobs) == room

    async def _claim(self, now: datetime, horizon: timedelta, limit: int) -> list[Job]:
        params = ClaimParams(
            worker_id=self.worker_id, now=now, horizon=horizon, lease=self.lease, limit=limit
        )
        began = time.perf_counter()
        jobs = await self._call(self.store.claim_due, params)
        self.stats.claim_seconds += time.perf_counter() - began
        self.stats.claimed += len(jobs)
        return jobs

    def _accept(self, jobs: Sequence[Job]) -> None:
        """Hold the claimed jobs: start the due ones now, arm one timer per future instant."""
        loop = asyncio.get_running_loop()
        now = self.clock.now()
        due: list[_Held] = []
        for job in jobs:
            held = _Held(job)
            self._held[job.id] = held
            self._unstarted += 1
            if job.run_at <= now:
                due.append(held)
                continue
            bucket = self._buckets.get(job.run_at)
            if bucket is None:
                self._buckets[job.run_at] = [held]
                delay = (job.run_at - now).total_seconds()
                self._timers[job.run_at] = loop.call_later(delay, self._fire_bucket, job.run_at)
            else:
                bucket.append(held)
        if self._held:
            assert self._idle is not None
            self._idle.clear()
        if due:
            # Next loop turn: the caller's next claim is then already on its way to the
            # store while these run (claim latency overlaps handler time).
            loop.call_soon(self._fire, due)

    def _fire_bucket(self, run_at: datetime) -> None:
        self._timers.pop(run_at, None)
        self._fire(self._buckets.pop(run_at, []))

    def _fire(self, batch: list[_Held]) -> None:
        """The instant of these jobs has come: start them, or queue them for a slot."""
        for held in batch:
            if held.state != _WAITING:
                continue  # revoked while waiting
            if self._running < self.concurrency and not self._ready:
                self._start(held)
            else:
                held.state = _READY
                self._ready.append(held)

    def _start(self, held: _Held) -> None:
        job = held.job
        held.state = _RUNNING
        self._unstarted -= 1
        self._running += 1
        self.stats.started += 1
        target = job.target
        started_at = self.clock.now()
        held.started_at = started_at
        if isinstance(target, PythonTarget):
            registered = self.handlers.get(target.handler)
            if registered is not None and registered.is_async:
                # No task of its own: the consumers run it (see `_consume`).
                self._runq.append(held)
                if len(self._runq) > self._free:
                    self._spawn_consumer()
                return
            result = run_inline(self.handlers, target.handler, job)
            if result is not None:
                self._finish(held, result)
                return
        held.task = asyncio.get_running_loop().create_task(self._attempt(held))

    def _spawn_consumer(self) -> None:
        self._free += 1
        task = asyncio.get_running_loop().create_task(self._consume(), name="recoup-consumer")
        self._consumers.add(task)
        task.add_done_callback(self._consumers.discard)

    async def _consume(self) -> None:
        """Run started attempts of async Python handlers from `_runq`, one after another, and
        end when none is left. A task per attempt costs more than a no-op handler; a few of
        these carry them instead: another is spawned whenever more attempts wait than there
        are consumers free to take them (not awaiting a handler), so an attempt never waits
        for another one's handler, and there are never more than `concurrency`. A handler
        runs inside its consumer's task, so `asyncio.timeout` and `current_task` work in it.

        Revoking an attempt cancels its consumer; the consumer reports it interrupted, takes
        the cancellation back (`uncancel`) and goes on. Any other cancellation (shutdown past
        its grace) ends the consumer, interrupting the attempts still queued too."""
        task = asyncio.current_task()
        assert task is not None
        runq = self._runq
        streak = 0
        try:
            while runq:
                held = runq.popleft()
                self._free -= 1
                if held.state != _RUNNING:  # revoked while queued: release its slot
                    self._free += 1
                    self._finish(held, _INTERRUPTED)
                    continue
                job = held.job
                target = job.target
                assert isinstance(target, PythonTarget)
                held.task = task
                try:
                    result = await run_handler(self.handlers, target.handler, job)
                except asyncio.CancelledError:
                    held.task = None
                    revoked = held.state == _REVOKED
                    self._free += 1
                    self._finish(held, _INTERRUPTED)
                    if revoked and task.uncancel() == 0:
                        continue
                    raise
                except Exception as exc:  # a bug of ours, not the handler's: retry
                    log.exception("worker %s: attempt of job %s crashed", self.worker_id, job.id)
                    result = AttemptResult(AttemptOutcome.RETRY, error=describe(exc))
                held.task = None
                if held.state == _REVOKED and task.cancelling():
                    task.uncancel()  # the handler swallowed its revocation
                self._free += 1
                self._finish(held, result)
                streak += 1
                if streak >= CONSUMER_STREAK:  # handlers that never suspend: let others run
                    streak = 0
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            while runq:  # nobody will run these now
                held = runq.popleft()
                self._finish(held, _INTERRUPTED)
            raise
        finally:
            self._free -= 1

    async def _attempt(self, held: _Held) -> None:
        job = held.job
        target = job.target
        result: AttemptResult
        try:
            if isinstance(target, HttpTarget):
                assert self._http is not None
                secret = await self._secret(job.tenant)
                result = await self._http.send(job, secret=secret)
            else:
                result = await run_handler(self.handlers, target.handler, job)
        except asyncio.CancelledError:
            self._finish(held, _INTERRUPTED)
            raise
        except Exception as exc:  # a bug of ours, not the target's: retry
            log.exception("worker %s: attempt of job %s crashed", self.worker_id, job.id)
            result = AttemptResult(AttemptOutcome.RETRY, error=describe(exc))
        self._finish(held, result)

    def _finish(self, held: _Held, result: AttemptResult) -> None:
        """An attempt ended: queue its completion, give its slot to the next ready job."""
        if held.state not in (_RUNNING, _REVOKED):
            return
        revoked = held.state == _REVOKED
        held.state = _DONE
        self._running -= 1
        assert held.started_at is not None
        if not revoked:
            self._done.append((held, result, held.started_at, self.clock.now()))
            assert self._flush_wanted is not None
            self._flush_wanted.set()
        else:
            self._held.pop(held.job.id, None)
        while self._ready and self._running < self.concurrency and not self._stopping:
            nxt = self._ready.popleft()
            if nxt.state == _READY:
                self._start(nxt)
        self._check_idle()

    def _check_idle(self) -> None:
        if self._running == 0 and self._unstarted == 0 and self._idle is not None:
            self._idle.set()

    # -- completions ---------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        assert self._flush_wanted is not None
        while True:
            await self._flush_wanted.wait()
            if len(self._done) < self.flush_size:
                await asyncio.sleep(self.flush_interval)  # let the batch grow a little
            try:
                await self._flush()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("worker %s: writing completions failed; retrying", self.worker_id)
                await asyncio.sleep(ERROR_PAUSE)

    async def _flush(self) -> None:
        """Write every queued completion (one `complete_many` call per batch)."""
        assert self._flush_lock is not None and self._flush_wanted is not None
        async with self._flush_lock:
            while self._done:
                batch, self._done = self._done, []
                self._flush_wanted.clear()
                completions = [self._completion(*item) for item in batch]
                began = time.perf_counter()
                try:
                    await self._call(self.store.complete_many, completions, now=self.clock.now())
                except BaseException:
                    self._done[:0] = batch  # keep them for the next try; leases cover us
                    raise
                self.stats.flush_seconds += time.perf_counter() - began
                self.stats.flushes += 1
                for held, _, _, _ in batch:
                    self._held.pop(held.job.id, None)
                if self.on_attempt is not None:  # one test per batch when nobody observes
                    self._report_attempts(batch, completions)
                if self._wake is not None:
                    self._wake.set()  # room to claim more

    def _report_attempts(
        self,
        batch: list[tuple[_Held, AttemptResult, datetime, datetime]],
        completions: list[Completion],
    ) -> None:
        observe = self.on_attempt
        assert observe is not None
        for (held, _, _, _), completion in zip(batch, completions, strict=True):
            try:
                observe(held.job, completion.run)
            except Exception:  # an observer's bug must not stop the worker or lose a batch
                log.exception("worker %s: on_attempt failed", self.worker_id)

    def _completion(
        self, held: _Held, result: AttemptResult, started_at: datetime, finished_at: datetime
    ) -> Completion:
        job = held.job
        retry_at: datetime | None = None
        error = result.error
        if result.outcome is AttemptOutcome.SUCCEEDED:
            outcome = RunOutcome.SUCCEEDED
            self.stats.succeeded += 1
        elif result.outcome is AttemptOutcome.RETRY and job.attempts < job.retry.max_attempts:
            outcome = RunOutcome.RETRY
            delay = backoff_delay(
                job.retry, job.attempts, rng=self._rng, retry_after=result.retry_after
            )
            retry_at = finished_at + delay
            self.stats.retried += 1
        else:
            outcome = RunOutcome.FAILED
            if result.outcome is AttemptOutcome.RETRY:
                error = f"{error} (attempts spent: {job.attempts} of {job.retry.max_attempts})"
            self.stats.failed += 1
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
            "worker_id": self.worker_id,
        }
        # The instants come from our clock; a clock handing out naive ones is refused by the
        # validating constructor, every other run skips re-validation (one per attempt).
        if started_at.tzinfo is None or finished_at.tzinfo is None:
            run = Run(**fields)
        else:
            run = trusted(Run, fields)
        return trusted(Completion, {"run": run, "worker_id": self.worker_id, "retry_at": retry_at})

    # -- leases --------------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        interval = self.heartbeat_interval.total_seconds()
        while True:
            await asyncio.sleep(interval)
            try:
                await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("worker %s: heartbeat failed", self.worker_id)

    async def _heartbeat(self) -> None:
        # Finished attempts whose completion is not written yet are still ours: keep their
        # leases too, or a slow flush would let another worker rescue and rerun them.
        ids = list(self._held)
        if not ids:
            return
        lease_until = self.clock.now() + self.lease
        still = set(
            await self._call(self.store.heartbeat, self.worker_id, ids, lease_until=lease_until)
        )
        for jid in ids:
            if jid not in still:
                held = self._held.get(jid)
                if held is not None and held.state != _DONE:
                    self._revoke(held)

    def _revoke(self, held: _Held) -> None:
        """The store says we no longer hold this job: do not start it, stop its attempt."""
        self.stats.revoked += 1
        if held.state in (_WAITING, _READY):
            held.state = _REVOKED
            self._unstarted -= 1
            self._held.pop(held.job.id, None)
            self._check_idle()
        elif held.state == _RUNNING:
            held.state = _REVOKED
            if held.task is not None:
                held.task.cancel()

    async def _rescue(self, now: datetime) -> None:
        while True:
            rescued = await self._call(self.store.rescue_expired, now=now)
            self.stats.rescued += len(rescued)
            if len(rescued) < 1000:
                return

    async def _prune(self, now: datetime) -> None:
        while True:
            result = await self._call(
                self.store.prune, now=now, keep_runs_for=self.keep_runs_for, limit=PRUNE_LIMIT
            )
            self.stats.pruned_jobs += result.jobs
            self.stats.pruned_runs += result.runs
            if result.jobs < PRUNE_LIMIT and result.runs < PRUNE_LIMIT:
                return

    async def _materialise(self, now: datetime) -> None:
        created = await self._call(materialise, self.store, now=now, horizon=self.schedule_horizon)
        self.stats.materialised += created
        if created and self._wake is not None:
            self._wake.set()

    async def _secret(self, tenant: str) -> str | None:
        cached = self._secrets.get(tenant)
        mono = time.monotonic()
        if cached is not None and cached[1] > mono:
            return cached[0]
        row = await self._call(self.store.get_tenant, tenant)
        secret = row.signing_secret if row is not None else None
        if secret is None:
            log.warning("worker %s: tenant %r has no signing secret", self.worker_id, tenant)
        self._secrets[tenant] = (secret, mono + SECRET_TTL)
        return secret

    # -- sleeping and stopping -----------------------------------------------------------------

    async def _sleep(self, until_deadline: float) -> None:
        """Sleep until the earliest known due instant (minus the horizon), a deadline, a
        notification or a poke."""
        timeout = min(self.max_sleep, max(until_deadline, 0.0))
        if self.prefetch - self._unstarted > 0:
            next_due = await self._call(self.store.next_due_at)
            if next_due is not None:
                ahead = (next_due - self.horizon - self.clock.now()).total_seconds()
                timeout = min(timeout, ahead)
        await self._wait_wake(max(timeout, MIN_SLEEP))

    async def _wait_wake(self, timeout: float) -> None:
        assert self._wake is not None
        if self._stopping:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)
        self._wake.clear()

    def _begin_stop(self) -> None:
        self._stopping = True
        if self._wake is not None:
            self._wake.set()

    async def _shutdown(self) -> None:
        """Release what never started, let running attempts finish (up to `grace`), flush."""
        self._stopping = True
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._buckets.clear()
        unstarted = [h for h in self._held.values() if h.state in (_WAITING, _READY)]
        self._ready.clear()
        for held in unstarted:
            held.state = _REVOKED
            self._held.pop(held.job.id, None)
        self._unstarted = 0
        if unstarted:
            ids = [h.job.id for h in unstarted]
            try:
                released = await self._call(
                    self.store.release, self.worker_id, ids, now=self.clock.now()
                )
                self.stats.released += released
            except Exception:
                log.exception("worker %s: releasing %d jobs failed", self.worker_id, len(ids))
        tasks = {h.task for h in self._held.values() if h.state == _RUNNING and h.task}
        tasks |= self._consumers  # they end once the attempts they run and hold are done
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.grace.total_seconds())
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        self._check_idle()
        await self._flush()


__all__ = ["DEFAULT_HORIZON", "DEFAULT_LEASE", "Worker", "WorkerStats", "default_worker_id"]
