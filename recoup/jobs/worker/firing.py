"""Claiming and firing: claim what is due within the horizon, hold it in memory, and start each
job at its exact instant (ARCHITECTURE.md, 'Time in the worker')."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from recoup.jobs.model import Job
from recoup.jobs.store import ClaimParams, JobStore
from recoup.jobs.worker.clocks import Elapsed, Timer
from recoup.jobs.worker.config import WorkerConfig
from recoup.jobs.worker.ledger import WAITING, Held, Ledger
from recoup.jobs.worker.resources import StoreCall

log = logging.getLogger("recoup.worker")

MIN_REARM = 0.0002  # seconds; the least a timer that fired early waits again


class Firing:
    """Claims jobs under a lease and holds them (`accept`): a job whose instant has come
    starts on the next loop turn; the others wait in one bucket per distinct `run_at`, each
    with one timer, so a burst due at one instant starts within milliseconds of it instead
    of at the next poll. A timer is armed for the due-time distance in elapsed time and, when
    it fires, the due clock is asked again: a job never starts before its instant. A job
    whose instant has come starts at once if a slot is free, else waits in `ledger.ready`
    (FIFO) for one (`start` is the runner's)."""

    def __init__(
        self,
        *,
        store: JobStore,
        call: StoreCall,
        config: WorkerConfig,
        ledger: Ledger,
        now: Callable[[], datetime],
        elapsed: Elapsed,
        start: Callable[[Held], None],
        gate: Callable[[], int | None] | None = None,
        store_clock: bool = False,
        wake: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._call = call
        self._config = config
        self._ledger = ledger
        self._stats = ledger.stats
        self._now = now
        self._elapsed = elapsed
        self._start = start
        self._gate = gate  # the session's epoch, None while it is down (`SessionKeeper.gate`)
        # On the wall clock: what is due and the leases by the store's clock (`ClaimParams`).
        self._store_clock = store_clock
        self._buckets: dict[datetime, list[Held]] = {}
        self._timers: dict[datetime, Timer] = {}
        # Late rate-limited jobs to hand back in the next claim's transaction (`give_back_late`),
        # and what wakes the main loop to make that claim.
        self._late: list[Job] = []
        self._wake = wake

    def room(self) -> int:
        """How many jobs the next claim may take: the free slots (not running nor promised to
        a job whose instant has come), plus as many as were freed since the previous claim
        (what this worker gets through in one claim's time: so quick handlers are claimed in
        large batches while slow ones are not), within `batch_size` and the unstarted limit.
        A saturated worker does not sit on due jobs that idle workers could run. Jobs claimed
        ahead, not due yet, do not take slots: a burst due at one instant is still claimed
        ahead in full, in several claims."""
        ledger, config = self._ledger, self._config
        free = config.concurrency - ledger.running - len(ledger.ready) + ledger.freed
        return min(config.batch_size, config.unstarted_limit - ledger.unstarted, free)

    async def claim_once(self) -> bool:
        """Claim what is due within the horizon, up to the room left; True when a full batch
        came back (so more may be waiting). Nothing while the worker's session is down; a
        claim that returns after the session it was made under was lost is given back
        unstarted (the jobs may already be another worker's to run)."""
        epoch = None if self._gate is None else self._gate()
        if self._gate is not None and epoch is None:
            return False
        room = self.room()
        if room <= 0:
            if self._late:  # no claim to carry them: a give-back of their own
                await self._give_back(self.take_late())
            return False
        self._ledger.freed = 0
        jobs = await self.claim(self._now(), self._config.horizon, room)
        if self._gate is not None and self._gate() != epoch:
            await self._give_back(jobs)
            return False
        if jobs:
            self.accept(jobs)
        return len(jobs) == room

    async def _give_back(self, jobs: Sequence[Job]) -> None:
        if not jobs:
            return
        ids = [job.id for job in jobs]
        try:
            released = await self._call(
                self._store.release, self._config.worker_id, ids, now=self._now()
            )
            self._stats.released += released
        except Exception:
            # Left running under our id: the next session's opening hands them back.
            log.warning(
                "worker %s: giving back %d jobs claimed under a lost session failed",
                self._config.worker_id,
                len(ids),
                exc_info=True,
            )

    async def claim(self, now: datetime, horizon: timedelta, limit: int) -> list[Job]:
        late = self.take_late()
        params = ClaimParams(
            worker_id=self._config.worker_id,
            now=now,
            horizon=horizon,
            lease=self._config.lease,
            limit=limit,
            store_clock=self._store_clock,
            give_back=tuple(job.id for job in late),
        )
        began = self._elapsed.monotonic()
        try:
            jobs = await self._call(self._store.claim_due, params)
        except BaseException:
            self._late[:0] = late  # not handed back: the next claim carries them
            raise
        self._stats.released += len(late)
        self._stats.claim_seconds += self._elapsed.monotonic() - began
        self._stats.claimed += len(jobs)
        return jobs

    async def claim_batch(self, now: datetime, until: datetime, limit: int) -> list[Job]:
        """A test clock's batch: the earliest jobs due by `until` (up to `limit`), at most one
        per job group. The later jobs of a group are given back at once: they run after it, in
        a later batch, in due order."""
        claimed = await self.claim(now, max(until - now, timedelta(0)), limit)
        jobs, later = first_of_each_group(claimed)
        if later:
            ids = [job.id for job in later]
            released = await self._call(self._store.release, self._config.worker_id, ids, now=now)
            self._stats.released += released
        return jobs

    def accept(self, jobs: Sequence[Job]) -> None:
        """Hold the claimed jobs: start the due ones now, arm one timer per future instant."""
        ledger = self._ledger
        now = self._now()
        due: list[Held] = []
        for job in jobs:
            held = ledger.hold(job)  # an older attempt of it still held is revoked
            if job.run_at <= now:
                due.append(held)
                continue
            bucket = self._buckets.get(job.run_at)
            if bucket is None:
                self._buckets[job.run_at] = [held]
                self._arm(job.run_at, (job.run_at - now).total_seconds())
            else:
                bucket.append(held)
        if ledger.held:
            assert ledger.idle is not None
            ledger.idle.clear()
        if due:
            # Next loop turn: the caller's next claim is then already on its way to the
            # store while these run (claim latency overlaps handler time).
            asyncio.get_running_loop().call_soon(self.fire, due)

    def _arm(self, run_at: datetime, delay: float) -> None:
        self._timers[run_at] = self._elapsed.call_later(delay, lambda: self._fire_bucket(run_at))

    def _fire_bucket(self, run_at: datetime) -> None:
        # The timer measured the due-time distance in elapsed time: by the due clock it may
        # come a hair early (or, on a virtual clock, long before). Never start a job before
        # its instant: wait again.
        early = (run_at - self._now()).total_seconds()
        if early > 0:
            self._arm(run_at, max(early, MIN_REARM))
            return
        self._timers.pop(run_at, None)
        self.fire(self._buckets.pop(run_at, []))

    def fire(self, batch: list[Held]) -> None:
        """The instant of these jobs has come: start them, or queue them for a slot."""
        ledger = self._ledger
        for held in batch:
            if held.state is not WAITING:
                continue  # revoked while waiting
            if ledger.running < self._config.concurrency and not ledger.ready:
                self._start(held)
            else:
                ledger.queue(held)

    def give_back_late(self, held: Held) -> None:
        """A rate-limited job whose start came later than the tolerance after its reserved
        slot (`recoup.jobs.flow`): not started, handed back to the store by this worker's next
        claim, in the claim's own transaction (`ClaimParams.give_back`), which may reserve it
        a new slot at once."""
        self._ledger.revoke(held)
        self._stats.late_flow_starts += 1
        self._late.append(held.job)
        if self._wake is not None:
            self._wake()  # the main loop's next claim carries it back

    def take_late(self) -> list[Job]:
        """The late jobs not handed back yet, no longer kept here (the caller hands them
        back: a claim, or the worker's stop with its unstarted jobs)."""
        late, self._late = self._late, []
        return late

    def disarm(self) -> None:
        """Cancel every timer and forget the buckets (the worker is stopping)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._buckets.clear()


def first_of_each_group(jobs: Sequence[Job]) -> tuple[list[Job], list[Job]]:
    """(the first job of each group and every job without one, the later jobs of a group), in
    the order given."""
    first: list[Job] = []
    later: list[Job] = []
    seen: set[tuple[str, str]] = set()
    for job in jobs:
        if job.group is not None:
            key = (job.tenant, job.group)
            if key in seen:
                later.append(job)
                continue
            seen.add(key)
        first.append(job)
    return first, later


__all__ = ["MIN_REARM", "Firing", "first_of_each_group"]
