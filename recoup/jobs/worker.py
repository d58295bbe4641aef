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
  a FIFO for a slot. A claim takes no more than the free slots plus those freed since the
  previous claim (`_claim_room`): a saturated worker leaves due jobs to idle ones. Async
  handlers and HTTP targets run as tasks; sync handlers in a thread, or inline on the loop
  when registered `inline=True` (no task, no thread: the no-op path).
  Each attempt but an inline one is bounded by the job's `timeout` (`HttpExecutor.send`,
  `run_handler`; on consumers, one timer for all, `_time_out_attempts`): past it, it is
  cancelled (a sync handler's thread is left to finish unobserved) and retried.
- **Leases.** Every job this worker holds (claimed and not yet reported) is heartbeat in one
  store call every `lease / 3`, attempt by attempt; a job the store says we no longer hold
  (cancelled, rescued after a stall, or claimed again since) is dropped if not started, and
  its attempt is interrupted if it is running (its completion is still written: the store
  logs it as cancelled, or refuses it). When no heartbeat has succeeded for 80 % of a lease,
  every held job is given up the same way before another worker can rescue it. A job claimed
  again by this worker replaces (and interrupts) its older attempt; a batch of completions
  carries one attempt per job.
- **Batched completions.** Outcomes queue in memory; one flusher writes them with one
  `complete_many` call as soon as `flush_size` are waiting or `flush_interval` after the first
  one, whichever comes first; a flush in flight lets the next batch grow meanwhile.
- **Rescue, schedules, retention.** Every `lease / 2` the worker rescues expired leases
  (anyone's); every `schedule_interval` it materialises schedule occurrences due within
  `schedule_horizon`; every `prune_interval` it deletes finished jobs past their `keep_for`
  and runs older than `keep_runs_for` (None turns pruning off). A failing step is logged and
  tried again at its next turn; claiming goes on meanwhile.
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
import math
import os
import random
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
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
    timed_out,
)
from recoup.timekeeping.clock import Clock, SystemClock

log = logging.getLogger("recoup.worker")

T = TypeVar("T")

DEFAULT_LEASE = timedelta(seconds=30)
DEFAULT_HORIZON = timedelta(milliseconds=500)  # claim this far ahead; fire from memory
DEFAULT_GRACE = timedelta(seconds=30)  # running attempts may finish this long after stop
MAX_SLEEP = 1.0  # seconds; the longest idle sleep without a notification
MIN_REARM = 0.0002  # seconds; the least a timer that fired early waits again
MIN_SLEEP = 0.002  # seconds; the shortest idle sleep, so a contended claim cannot spin
ERROR_PAUSE = 1.0  # seconds to wait after a store error before trying again
FLUSH_RETRY_PAUSE = 0.05  # seconds before the first retry of a failed flush (then doubling)
NOTIFY_WAIT = 0.1  # seconds each `wait_for_notify` call blocks (and stop waits for the listener)
SECRET_TTL = 60.0  # seconds a tenant's signing secret is cached
SCHEDULE_INTERVAL = timedelta(seconds=5)  # how often the materialiser runs
PRUNE_INTERVAL = timedelta(minutes=10)  # how often finished jobs past keep_for are deleted
KEEP_RUNS_FOR = timedelta(days=30)  # run-log retention (kept after their job is deleted)
PRUNE_LIMIT = 10_000  # rows deleted per prune call (each its own short transaction)
RESCUE_LIMIT = 1000  # expired leases rescued per call (each its own short transaction)

LEASE_MARGIN = 0.2  # held jobs are given up when no heartbeat succeeded for 80 % of a lease

_WAITING, _READY, _RUNNING, _DONE, _REVOKED = range(5)
CONSUMER_STREAK = 64  # attempts a consumer runs back to back before yielding to the loop
_INTERRUPTED = AttemptResult(
    AttemptOutcome.RETRY, error="interrupted: the worker stopped, or no longer holds the job"
)


class _Held:
    """A job this worker holds a lease on, from claim until its completion is written."""

    __slots__ = ("expires", "job", "revoked", "started_at", "state", "task", "timed_out")

    def __init__(self, job: Job) -> None:
        self.job = job
        self.state = _WAITING
        self.task: asyncio.Task[None] | None = None
        self.started_at: datetime | None = None
        # An async handler's attempt: the loop time its timeout ends, and whether it did.
        self.expires = math.inf
        self.timed_out = False
        self.revoked = False  # the store took it back while it ran (not reported on_attempt)


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


def _latest_attempts(
    done: list[tuple[_Held, AttemptResult, datetime, datetime]],
) -> list[tuple[_Held, AttemptResult, datetime, datetime]]:
    """The queued completions with at most one per job: its latest attempt. An older attempt
    of a job this worker claimed again is stale (the store would refuse it), and a batch
    keyed by job id must not carry two rows for one job."""
    if len({held.job.id for held, _, _, _ in done}) == len(done):
        return done  # the usual case: no job twice
    latest: dict[str, int] = {}
    for held, _, _, _ in done:
        latest[held.job.id] = max(latest.get(held.job.id, 0), held.job.attempts)
    return [item for item in done if item[0].job.attempts == latest[item[0].job.id]]


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
        if heartbeat_interval is not None and heartbeat_interval >= lease * (1 - LEASE_MARGIN):
            raise ValueError("heartbeat_interval must be well within the lease")
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
        self._freed = 0  # slots freed since the previous claim (see `_claim_room`)
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
        self._timeouts: asyncio.TimerHandle | None = None  # see `_time_out_attempts`
        self._timeouts_at = math.inf  # the loop time it fires at
        self._lease_ok_at = 0.0  # monotonic: when the last heartbeat that succeeded began
        self._lease_watch: asyncio.TimerHandle | None = None

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
                        # Each maintenance deadline advances before its call, and a failing
                        # call is logged and skipped: it must never keep the loop from claiming.
                        mono = time.monotonic()
                        if mono >= next_rescue:
                            next_rescue = mono + self.rescue_interval.total_seconds()
                            await self._maintain("rescue", self._rescue)
                        if mono >= next_schedules:
                            next_schedules = (
                                mono + self.schedule_interval.total_seconds()
                                if self.schedules
                                else never
                            )
                            if self.schedules:
                                await self._maintain("materialise", self._materialise)
                        if mono >= next_prune:
                            next_prune = (
                                mono + self.prune_interval.total_seconds()
                                if self.prune_interval is not None
                                else never
                            )
                            if self.prune_interval is not None:
                                await self._maintain("prune", self._prune)
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
            if self._timeouts is not None:  # a timer of this loop: the next session arms anew
                self._timeouts.cancel()
            self._timeouts, self._timeouts_at = None, math.inf
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
        room = self._claim_room()
        if room <= 0:
            return False
        self._freed = 0
        jobs = await self._claim(self.clock.now(), self.horizon, room)
        if jobs:
            self._accept(jobs)
        return len(jobs) == room

    def _claim_room(self) -> int:
        """How many jobs the next claim may take: the free slots (not running nor promised to
        a job whose instant has come), plus as many as were freed since the previous claim
        (what this worker gets through in one claim's time: so quick handlers are claimed in
        large batches while slow ones are not), within `batch_size` and `prefetch`. A
        saturated worker does not sit on due jobs that idle workers could run. Jobs claimed
        ahead, not due yet, do not take slots: a burst due at one instant is still claimed
        ahead in full, in several claims."""
        free = self.concurrency - self._running - len(self._ready) + self._freed
        return min(self.batch_size, self.prefetch - self._unstarted, free)

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
            old = self._held.get(job.id)
            if old is not None and old.state != _DONE:
                # We claimed it again, so the store took the older attempt back (our lease
                # lapsed during a stall and it was rescued): stop that one first.
                self._revoke(old)
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
        # The timer was armed from a wall-clock delta on the loop's monotonic clock: it may
        # come a hair early by our clock. Never start a job before its instant: wait again.
        early = (run_at - self.clock.now()).total_seconds()
        if early > 0:
            self._timers[run_at] = asyncio.get_running_loop().call_later(
                max(early, MIN_REARM), self._fire_bucket, run_at
            )
            return
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
        the cancellation back (`uncancel`) and goes on. An attempt past its job's timeout is
        cancelled the same way (`_time_out_attempts`, as `asyncio.timeout` would but without a
        timer per attempt) and reported timed out. Any other cancellation (shutdown past its
        grace) ends the consumer, interrupting the attempts still queued too."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
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
                held.expires = loop.time() + job.timeout.total_seconds()
                if held.expires < self._timeouts_at:
                    self._watch_timeouts(held.expires)
                held.task = task
                began = time.perf_counter()
                try:
                    result = await run_handler(self.handlers, target.handler, job, bounded=False)
                except asyncio.CancelledError:
                    held.task = None
                    if held.timed_out and task.uncancel() == 0:  # the timeout's alone
                        self._free += 1
                        self._finish(held, timed_out(job, began))
                        continue
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
                if held.timed_out:  # the handler swallowed its timeout and returned late
                    task.uncancel()
                    result = timed_out(job, began)
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

    def _watch_timeouts(self, when: float) -> None:
        """(Re-)arm the one timer that enforces async handlers' timeouts at loop time `when`.
        Attempts on consumers do not arm one each: an attempt whose timeout ends after the
        armed instant is found by `_time_out_attempts` when it fires (the no-op path then
        costs a comparison, not a timer)."""
        if self._timeouts is not None:
            self._timeouts.cancel()
        self._timeouts = asyncio.get_running_loop().call_at(when, self._time_out_attempts)
        self._timeouts_at = when

    def _time_out_attempts(self) -> None:
        """Cancel every consumer-run attempt past its timeout (its consumer reports it timed
        out), and arm the timer again for the earliest timeout still ahead."""
        self._timeouts, self._timeouts_at = None, math.inf
        now = asyncio.get_running_loop().time()
        ahead = math.inf
        for held in self._held.values():
            if held.state != _RUNNING or held.task is None or held.expires == math.inf:
                continue  # not running on a consumer now
            if held.expires <= now:
                if not held.timed_out:
                    held.timed_out = True
                    held.task.cancel()
            else:
                ahead = min(ahead, held.expires)
        if ahead < math.inf:
            self._watch_timeouts(ahead)

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
        held.revoked = held.state == _REVOKED
        held.state = _DONE
        self._running -= 1
        self._freed += 1
        assert held.started_at is not None
        # A revoked attempt is reported too: the store logs it as cancelled when the job was
        # cancelled during it, and refuses it (logging nothing) when the lease was lost.
        self._done.append((held, result, held.started_at, self.clock.now()))
        assert self._flush_wanted is not None
        self._flush_wanted.set()
        while self._ready and self._running < self.concurrency and not self._stopping:
            nxt = self._ready.popleft()
            if nxt.state == _READY:
                self._start(nxt)
        self._check_idle()

    def _forget(self, held: _Held) -> None:
        """Stop holding this attempt (not a newer attempt of its job that replaced it)."""
        if self._held.get(held.job.id) is held:
            del self._held[held.job.id]

    def _check_idle(self) -> None:
        if self._running == 0 and self._unstarted == 0 and self._idle is not None:
            self._idle.set()

    # -- completions ---------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        assert self._flush_wanted is not None
        pause = FLUSH_RETRY_PAUSE
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
                # The batch is queued again: try again after a pause (doubling up to
                # ERROR_PAUSE) even if no other completion comes to ask for a flush.
                await asyncio.sleep(pause)
                pause = min(2 * pause, ERROR_PAUSE)
                self._flush_wanted.set()
            else:
                pause = FLUSH_RETRY_PAUSE

    async def _flush(self) -> None:
        """Write every queued completion (one `complete_many` call per batch)."""
        assert self._flush_lock is not None and self._flush_wanted is not None
        async with self._flush_lock:
            while self._done:
                batch, self._done = _latest_attempts(self._done), []
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
                    self._forget(held)
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
            if held.revoked:
                continue
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
        self._lease_ok_at = time.monotonic()
        self._watch_leases()
        try:
            while True:
                await asyncio.sleep(interval)
                try:
                    await self._heartbeat()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("worker %s: heartbeat failed", self.worker_id)
        finally:
            if self._lease_watch is not None:
                self._lease_watch.cancel()
                self._lease_watch = None

    async def _heartbeat(self) -> None:
        # Finished attempts whose completion is not written yet are still ours: keep their
        # leases too, or a slow flush would let another worker rescue and rerun them.
        began = time.monotonic()
        held = list(self._held.values())
        if held:
            lease_until = self.clock.now() + self.lease
            ids = [h.job.id for h in held]
            attempts = [h.job.attempts for h in held]
            still = set(
                await self._call(
                    self.store.heartbeat,
                    self.worker_id,
                    ids,
                    lease_until=lease_until,
                    attempts=attempts,
                )
            )
            for h in held:
                if h.job.id not in still and h.state in (_WAITING, _READY, _RUNNING):
                    self._revoke(h)
        self._lease_ok_at = began  # every lease we hold now runs past began + lease
        self._watch_leases()

    def _watch_leases(self) -> None:
        """(Re-)arm the lease watchdog: it fires `lease × (1 − LEASE_MARGIN)` after the last
        heartbeat that succeeded began (see `_leases_lapsing`)."""
        if self._lease_watch is not None:
            self._lease_watch.cancel()
        safe = self.lease.total_seconds() * (1 - LEASE_MARGIN)
        delay = max(0.0, self._lease_ok_at + safe - time.monotonic())
        self._lease_watch = asyncio.get_running_loop().call_later(delay, self._leases_lapsing)

    def _leases_lapsing(self) -> None:
        """No heartbeat succeeded for most of a lease: our leases may lapse any moment and
        another worker then rescue and rerun these jobs. Give them up first: interrupt the
        running attempts (the store retries them once rescued), drop the unstarted ones."""
        self._lease_watch = None
        live = [h for h in self._held.values() if h.state in (_WAITING, _READY, _RUNNING)]
        if live:
            log.warning(
                "worker %s: no heartbeat succeeded for %.1f s; giving up %d held jobs",
                self.worker_id,
                time.monotonic() - self._lease_ok_at,
                len(live),
            )
            for held in live:
                self._revoke(held)
        # Whatever we hold from now on is claimed from now on, under a fresh lease.
        self._lease_ok_at = time.monotonic()
        self._watch_leases()

    def _revoke(self, held: _Held) -> None:
        """The store says we no longer hold this job: do not start it, stop its attempt."""
        self.stats.revoked += 1
        if held.state in (_WAITING, _READY):
            held.state = _REVOKED
            self._unstarted -= 1
            self._forget(held)
            self._check_idle()
        elif held.state == _RUNNING:
            held.state = _REVOKED
            if held.task is not None:
                held.task.cancel()

    async def _maintain(self, what: str, step: Callable[[datetime], Awaitable[None]]) -> None:
        """Run one maintenance step of the main loop; a failure is logged, not raised (the
        step runs again at its next deadline, and claiming goes on meanwhile)."""
        try:
            await step(self.clock.now())
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("worker %s: %s failed; claiming goes on", self.worker_id, what)

    async def _rescue(self, now: datetime) -> None:
        while True:
            rescued = await self._call(self.store.rescue_expired, now=now, limit=RESCUE_LIMIT)
            self.stats.rescued += len(rescued)
            if len(rescued) < RESCUE_LIMIT:
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
        if self._claim_room() > 0:
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
            self._forget(held)
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
