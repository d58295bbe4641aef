"""A worker's parts, built and wired from one configuration (`assemble`): the ledger of what
it holds, the store's threads and the HTTP session, the sleeper, the completion buffer, the
runner, the session keeper, the firing loop, the lease keeper and the maintenance. The
`Worker` facade drives them."""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import aiohttp

from recoup.jobs.handlers import HandlerRegistry
from recoup.jobs.model import Completion, Job, Run
from recoup.jobs.processes import this_process
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import SchedulerStore
from recoup.jobs.worker.clocks import WorkerClock, align
from recoup.jobs.worker.completions import CompletionBuffer
from recoup.jobs.worker.config import SESSION_MARGIN, WorkerConfig
from recoup.jobs.worker.firing import Firing
from recoup.jobs.worker.leases import LeaseKeeper
from recoup.jobs.worker.ledger import Ledger, WorkerStats
from recoup.jobs.worker.maintenance import Maintenance
from recoup.jobs.worker.resources import Resources, StoreCall
from recoup.jobs.worker.running import Runner
from recoup.jobs.worker.secret_cache import SecretCache
from recoup.jobs.worker.sessions import SessionKeeper
from recoup.jobs.worker.sleeping import Sleeper
from recoup.timekeeping.clock import OffsetClock

log = logging.getLogger("recoup.worker")

SKEW_WARNING = timedelta(seconds=1)  # a skew larger than this is logged (again when it moves)


@dataclass(frozen=True, kw_only=True)
class Parts:
    ledger: Ledger
    resources: Resources
    sleeper: Sleeper
    buffer: CompletionBuffer
    runner: Runner
    sessions: SessionKeeper
    firing: Firing
    leases: LeaseKeeper
    maintenance: Maintenance


def assemble(
    *,
    config: WorkerConfig,
    store: SchedulerStore,
    time: WorkerClock,
    ssrf: SsrfGuard,
    stats: WorkerStats,
    handlers: HandlerRegistry,
    http_session: Callable[[], aiohttp.ClientSession] | None,
    rng: random.Random,
    on_attempt: Callable[[Job, Run], None] | None,
) -> Parts:
    """The parts of one worker, wired to each other (see `Worker` for the arguments)."""
    now, elapsed = time.due.now, time.elapsed
    ledger = Ledger(stats)
    resources = Resources(
        store_threads=config.store_threads,
        ssrf=ssrf,
        wall_clock=time.wall,
        http_session=http_session,
        max_connections=config.concurrency,
    )
    call = resources.call
    store_clock = time.on_store_clock
    sleeper = Sleeper(
        now=now,
        elapsed=elapsed,
        horizon=config.horizon,
        max_sleep=config.max_sleep,
        worker_id=config.worker_id,
    )

    async def complete_many(completions: Sequence[Completion]) -> object:
        return await call(store.complete_many, completions, now=now())

    buffer = CompletionBuffer(
        complete_many=complete_many,
        ledger=ledger,
        elapsed=elapsed,
        rng=rng,
        worker_id=config.worker_id,
        flush_size=config.flush_size,
        flush_interval=config.flush_interval,
        on_attempt=on_attempt,
        written=sleeper.wake,
    )

    secrets = SecretCache(
        lambda tenant: call(store.get_tenant, tenant),
        elapsed=elapsed,
        worker_id=config.worker_id,
    )
    runner = Runner(
        handlers=handlers,
        ledger=ledger,
        buffer=buffer,
        secrets=secrets,
        http=resources.http,
        concurrency=config.concurrency,
        worker_id=config.worker_id,
        now=now,
        elapsed=elapsed,
    )
    sessions = SessionKeeper(
        store=store,
        worker=this_process(config.worker_id),
        rules=config.session_rules,
        ledger=ledger,
        flush=buffer.flush,
        now=now,
        elapsed=elapsed,
        every=config.session_beat.total_seconds(),
        margin=SESSION_MARGIN,
        opened=sleeper.wake,
    )
    firing = Firing(
        store=store,
        call=call,
        config=config,
        ledger=ledger,
        now=now,
        elapsed=elapsed,
        start=runner.start,
        gate=sessions.gate,
        store_clock=store_clock,
        wake=sleeper.wake,
    )
    runner.late = firing.give_back_late
    buffer.hold = runner.has_queued

    async def heartbeat(
        ids: Sequence[str], attempts: Sequence[int], lease_until: datetime
    ) -> list[str]:
        if store_clock:  # a lease past the store's clock: ours may be minutes off
            return await call(
                store.heartbeat, config.worker_id, ids, lease_for=config.lease, attempts=attempts
            )
        return await call(
            store.heartbeat,
            config.worker_id,
            ids,
            lease_until=lease_until,
            attempts=attempts,
        )

    leases = LeaseKeeper(
        heartbeat=heartbeat,
        ledger=ledger,
        now=now,
        elapsed=elapsed,
        lease=config.lease,
        every=config.heartbeat_every,
        safe=config.lease_safe,
        worker_id=config.worker_id,
    )
    maintenance = Maintenance(
        store=store,
        schedules=store if config.schedules else None,
        call=call,
        config=config,
        stats=stats,
        now=now,
        elapsed=elapsed,
        wake=sleeper.wake,
        align=None if time.aligned is None else _aligning(time.aligned, store, call, config),
        store_clock=store_clock,
    )
    return Parts(
        ledger=ledger,
        resources=resources,
        sleeper=sleeper,
        buffer=buffer,
        runner=runner,
        sessions=sessions,
        firing=firing,
        leases=leases,
        maintenance=maintenance,
    )


def _aligning(
    clock: OffsetClock, store: SchedulerStore, call: StoreCall, config: WorkerConfig
) -> Callable[[], Awaitable[None]]:
    """The maintenance step that sets `clock` on the store's clock (`align`), saying so when
    the machine's clock is off by more than `SKEW_WARNING` (again when that changes by more)."""
    told = timedelta(0)

    async def step() -> None:
        nonlocal told
        offset = await call(align, clock, store.read_clock)
        if abs(offset) > SKEW_WARNING and abs(offset - told) > SKEW_WARNING:
            told = offset
            log.warning(
                "worker %s: this machine's clock is %.3f s %s the database's; the worker goes "
                "by the database's",
                config.worker_id,
                abs(offset.total_seconds()),
                "behind" if offset > timedelta(0) else "ahead of",
            )

    return step
