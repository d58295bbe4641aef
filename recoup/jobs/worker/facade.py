"""The `Worker` facade: has its parts assembled from one configuration (`parts`), runs the main
loop, opens and reuses sessions, and stops gracefully."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta

import aiohttp

from recoup.jobs.handlers import HandlerRegistry
from recoup.jobs.model import Job, Run
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import SchedulerStore
from recoup.jobs.worker.clocks import Elapsed, RealElapsed, WorkerClock, wait_tasks
from recoup.jobs.worker.config import WorkerConfig
from recoup.jobs.worker.ledger import WorkerStats
from recoup.jobs.worker.parts import assemble
from recoup.timekeeping.clock import Clock, SystemClock

log = logging.getLogger("recoup.worker")

ERROR_PAUSE = 1.0  # seconds to wait after a store error before trying again


class Worker:
    """Runs due jobs from `store` (jobs, and the schedules it materialises unless
    `config.schedules` is off; see the package docstring for the design).

    Every tuning knob is a field of `config` (`WorkerConfig`; None: its defaults). The
    keyword arguments are the worker's collaborators: `clock` (due time, maybe a
    `VirtualClock`), `elapsed` (elapsed time: real unless a test steps it), `wall_clock`
    (signature timestamps: real even when `clock` is virtual), `handlers` (Python targets),
    `ssrf` (guards HTTP targets at send time; the default refuses every non-public address),
    `http_session` (makes the HTTP session of each worker session, on its event loop, closed
    with it; default: a pooled `guarded_client`), `rng` (backoff jitter: seed it for
    reproducible tests).

    `on_attempt(job, run)` observes every attempt whose completion this worker wrote (metrics,
    logs): called on the worker's event loop, once per attempt, right after the batch holding
    it was written, with the job as claimed (`job.run_at` is the instant it was due) and the
    run as reported (a RETRY may be logged as FAILED by the store when attempts are spent).
    Attempts the store took back (revoked) are not reported. It must be quick and must not
    block; an exception it raises is logged and ignored."""

    def __init__(
        self,
        store: SchedulerStore,
        config: WorkerConfig | None = None,
        *,
        clock: Clock | None = None,
        handlers: HandlerRegistry | None = None,
        ssrf: SsrfGuard | None = None,
        http_session: Callable[[], aiohttp.ClientSession] | None = None,
        wall_clock: Callable[[], datetime] | None = None,
        rng: random.Random | None = None,
        on_attempt: Callable[[Job, Run], None] | None = None,
        elapsed: Elapsed | None = None,
    ) -> None:
        if config is None:
            config = WorkerConfig()
        elif not isinstance(config, WorkerConfig):
            raise TypeError(f"config: expected a WorkerConfig, got {type(config).__name__}")
        self.config = config
        self.store = store
        self.time = WorkerClock.on(
            clock or SystemClock(),
            elapsed=elapsed or RealElapsed(),
            wall=wall_clock or SystemClock().now,
        )
        self.ssrf = ssrf or SsrfGuard()
        self.stats = WorkerStats()
        self.started = threading.Event()  # set once `run()` is claiming
        self.stopped = threading.Event()  # set once `run()` has shut down
        parts = assemble(
            config=self.config,
            store=store,
            time=self.time,
            ssrf=self.ssrf,
            stats=self.stats,
            handlers=handlers or HandlerRegistry(),
            http_session=http_session,
            rng=rng or random.Random(),
            on_attempt=on_attempt,
        )
        self._ledger, self._resources, self._sleeper = parts.ledger, parts.resources, parts.sleeper
        self._buffer, self._runner, self._sessions = parts.buffer, parts.runner, parts.sessions
        self._firing, self._leases = parts.firing, parts.leases
        self._maintenance = parts.maintenance
        self._session_loop: asyncio.AbstractEventLoop | None = None

    # -- what callers read -----------------------------------------------------------------

    @property
    def worker_id(self) -> str:
        return self.config.worker_id

    @property
    def lease(self) -> timedelta:
        return self.config.lease

    @property
    def grace(self) -> timedelta:
        return self.config.grace

    @property
    def clock(self) -> Clock:
        """The due clock (a wall clock given is read set on the store's clock: 'Clock skew' in
        ARCHITECTURE.md)."""
        return self.time.due

    @property
    def handlers(self) -> HandlerRegistry:
        return self._runner.handlers

    @property
    def on_attempt(self) -> Callable[[Job, Run], None] | None:
        return self._buffer.on_attempt

    @on_attempt.setter
    def on_attempt(self, observe: Callable[[Job, Run], None] | None) -> None:
        self._buffer.on_attempt = observe

    # -- sessions ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Worker]:
        """Open the worker's resources on the running event loop (store threads, the HTTP
        client on first use, the completion flusher, the lease keeper) for the block.
        `run_until_idle()` and `run()` inside it reuse them instead of opening their own:
        step a virtual clock and call `run_until_idle()` as often as needed for the price of
        one session. Nested sessions on the same loop reuse the open one."""
        loop = asyncio.get_running_loop()
        if self._session_loop is loop:
            yield self
            return
        if self._session_loop is not None:
            raise RuntimeError("the worker's session is open on another event loop")
        self._session_loop = loop
        self._resources.open()
        try:
            await self._maintenance.align()  # before anything is claimed or registered
        except Exception:
            # The store decides claims, leases and rescues by its own clock regardless.
            log.exception("worker %s: measuring the clock's skew failed", self.worker_id)
        self._sleeper.open()
        self._buffer.open()
        self._ledger.idle = asyncio.Event()
        self._ledger.idle.set()
        flusher = asyncio.create_task(self._buffer.flush_loop(), name="recoup-flusher")
        keeper = asyncio.create_task(self._leases.run(), name="recoup-heartbeat")
        try:
            yield self
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            try:
                await self._buffer.flush()
            finally:
                flusher.cancel()
                await asyncio.gather(flusher, return_exceptions=True)
                await self._resources.aclose()
                self._runner.close()
                self._sleeper.close()
                self._session_loop = None

    # -- running -----------------------------------------------------------------------------

    async def run(self, *, stop_when_idle: bool = False) -> None:
        """Run until `request_stop()`; then shut down gracefully: stop claiming, release
        claimed jobs not yet started, let running attempts finish for up to `grace`, then
        interrupt the rest (reported as retryable), flush every completion, close the
        worker's session (ARCHITECTURE.md, 'Worker sessions'). Claims are made only while
        the session is open.

        `stop_when_idle`: also stop, the same way, once nothing is running or held and a claim
        made after every completion was written finds nothing due: a drain of what is due,
        with the whole loop (claims overlapping running attempts) where `run_until_idle` runs
        one batch after another. Jobs due later are left for the next worker."""
        async with self.session():
            self._resources.http()  # build the client now, not on the first attempt's clock
            await self._sessions.start()
            keeper = asyncio.create_task(self._sessions.run(), name="recoup-session")
            listener = self._sleeper.listen(self.store.wait_for_notify)
            self._maintenance.reset()
            elapsed, ledger = self.time.elapsed, self._ledger
            self.started.set()
            try:
                while not ledger.stopping:
                    try:
                        await self._maintenance.run_due()
                        if await self._firing.claim_once():
                            continue  # a full batch: more may be due, claim again at once
                        if stop_when_idle and await self._nothing_left():
                            break
                        until = self._maintenance.next_deadline() - elapsed.monotonic()
                        next_due = None
                        # Without a session nothing is claimed: sleep until it opens (a wake).
                        if self._sessions.up and self._firing.room() > 0:
                            next_due = await self._resources.call(self.store.next_due_at)
                        await self._sleeper.sleep(until, next_due)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("worker %s: store call failed; retrying", self.worker_id)
                        await self._sleeper.wait(ERROR_PAUSE)
            finally:
                self._sleeper.stop_listening()  # it ends its last wait while we shut down
                try:
                    await self._shutdown()  # the session beats on while attempts finish
                finally:
                    keeper.cancel()
                    await asyncio.gather(keeper, return_exceptions=True)
                    await self._sessions.close()
                await asyncio.get_running_loop().run_in_executor(None, listener.join, 2.0)
                self.stopped.set()

    async def _nothing_left(self) -> bool:
        """Whether nothing is held and nothing is due (`run(stop_when_idle=True)`): with every
        completion written (a retry due at once is then in the store), one more claim finds
        nothing. The session must be up: a claim without one finds nothing by refusal."""
        idle = self._ledger.idle
        if idle is None or not idle.is_set() or not self._sessions.up:
            return False
        await self._buffer.flush()
        await self._firing.claim_once()
        return idle.is_set()

    async def run_until_idle(self, *, max_rounds: int = 1_000_000) -> int:
        """Hand back dead workers' jobs, rescue, materialise schedules, then claim and run every
        job due at the due clock's now until none is left (retries scheduled later than now
        are not waited for). Returns the number of attempts run. For tests, test clocks, the
        demo and benchmarks. May be called again after it returns (not while `run()` is
        running); inside `session()` it reuses the session. It opens no worker session of
        its own: what it claims is covered by leases alone."""
        self._ledger.stopping = False
        async with self.session():
            idle = self._ledger.idle
            assert idle is not None
            total = 0
            for _ in range(max_rounds):
                now = self.time.due.now()
                await self._maintenance.rescue_dead(now)
                await self._maintenance.rescue(now)
                await self._maintenance.materialise(now)
                jobs = await self._firing.claim(now, timedelta(0), self.config.batch_size)
                if not jobs:
                    break
                total += len(jobs)
                self._firing.accept(jobs)
                await idle.wait()
                await self._buffer.flush()
            return total

    async def run_batch(
        self,
        until: datetime,
        *,
        move: Callable[[datetime], object],
        pin: Callable[[datetime], contextlib.AbstractContextManager[None]],
    ) -> int:
        """One batch of a test clock (`TestClock`): claim the earliest jobs due by `until`, up
        to the concurrency and at most one per job group (a group's later jobs are given back
        for the next batch, so they run after it, in due order); `move(latest)` moves the due
        clock to the latest of their instants; then they run together, each at its own instant
        (`pin(run_at)` pins the due clock inside its attempt), as jobs whose instants come
        while earlier ones still run. Returns how many ran: 0 when none is due by `until`."""
        self._ledger.stopping = False
        async with self.session():
            idle = self._ledger.idle
            assert idle is not None
            now = self.time.due.now()
            await self._maintenance.rescue_dead(now)
            await self._maintenance.rescue(now)
            await self._maintenance.materialise(now)
            limit = min(self.config.batch_size, self.config.concurrency)
            jobs = await self._firing.claim_batch(now, until, limit)
            if not jobs:
                return 0
            move(max(job.run_at for job in jobs))
            self._runner.pin = pin
            try:
                self._firing.accept(jobs)
                await self._leases.beat()  # their leases now run from the clock's new now
                await idle.wait()
                await self._buffer.flush()
            finally:
                self._runner.pin = None
            return len(jobs)

    def drain(self) -> int:
        """`run_until_idle()` for synchronous callers (not from inside a running loop)."""
        return asyncio.run(self.run_until_idle())

    # -- stopping ----------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask a running worker to shut down gracefully. Safe from any thread or a signal
        handler."""
        if not self._sleeper.call_threadsafe(self._begin_stop):
            self._ledger.stopping = True

    def poke(self) -> None:
        """Wake the worker to look for due jobs now (e.g. after an in-process enqueue). Safe
        from any thread."""
        self._sleeper.wake_threadsafe()

    def _begin_stop(self) -> None:
        self._ledger.stopping = True
        self._sleeper.wake()

    async def _shutdown(self) -> None:
        """Release what never started, let running attempts finish (up to `grace`), flush."""
        ledger = self._ledger
        ledger.stopping = True
        self._firing.disarm()
        unstarted = ledger.release_unstarted()
        late = self._firing.take_late()  # given back late, no claim left to carry them
        if unstarted or late:
            ids = [h.job.id for h in unstarted] + [job.id for job in late]
            try:
                released = await self._resources.call(
                    self.store.release, self.worker_id, ids, now=self.time.due.now()
                )
                self.stats.released += released
            except Exception:
                log.exception("worker %s: releasing %d jobs failed", self.worker_id, len(ids))
        tasks = self._runner.running_tasks()
        if tasks:
            pending = await wait_tasks(self.time.elapsed, tasks, self.grace.total_seconds())
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        ledger.check_idle()
        await self._buffer.flush()


__all__ = ["ERROR_PAUSE", "Worker"]
