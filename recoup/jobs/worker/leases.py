"""The lease keeper: heartbeats for every held job, the watchdog that gives them up before
their leases can lapse, and revocation of the jobs the store took back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta

from recoup.jobs.worker.clocks import Elapsed, Timer, sleep
from recoup.jobs.worker.ledger import LIVE, Ledger

log = logging.getLogger("recoup.worker")

# heartbeat(ids, attempts, lease_until) → the ids still held (`JobStore.heartbeat`)
Heartbeat = Callable[[Sequence[str], Sequence[int], datetime], Awaitable[Sequence[str]]]


class LeaseKeeper:
    """Every job the worker holds (claimed, not yet reported) is heartbeat in one store call
    every `heartbeat_every` seconds of elapsed time, attempt by attempt, to `lease` past the
    due clock's now (the store keeps lease expiry in due time, as it does every instant; on a
    wall clock, `lease` past the store's own clock: the heartbeat `assemble` wires).
    A job the store says we no longer hold (cancelled, rescued after a stall, or claimed again
    since) is revoked: dropped if not started, its attempt interrupted if running.

    The watchdog runs on elapsed time: when no heartbeat has succeeded for `lease_safe`
    seconds (80 % of a lease), every held job is given up the same way before another worker
    can rescue it. A due clock that jumps days moves no lease of ours closer to it."""

    def __init__(
        self,
        *,
        heartbeat: Heartbeat,
        ledger: Ledger,
        now: Callable[[], datetime],
        elapsed: Elapsed,
        lease: timedelta,
        every: float,
        safe: float,
        worker_id: str,
    ) -> None:
        self._heartbeat = heartbeat
        self._ledger = ledger
        self._now = now
        self._elapsed = elapsed
        self._lease = lease
        self._every = every
        self._safe = safe
        self._worker_id = worker_id
        self._ok_at = 0.0  # elapsed: when the last heartbeat that succeeded began
        self._watch: Timer | None = None

    async def run(self) -> None:
        """Heartbeat until cancelled (a session's lifetime), the watchdog armed throughout."""
        self._ok_at = self._elapsed.monotonic()
        self._arm()
        try:
            while True:
                await sleep(self._elapsed, self._every)
                try:
                    await self.beat()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("worker %s: heartbeat failed", self._worker_id)
        finally:
            if self._watch is not None:
                self._watch.cancel()
                self._watch = None

    async def beat(self) -> None:
        """One heartbeat of every held job. Finished attempts whose completion is not written
        yet are still ours: keep their leases too, or a slow flush would let another worker
        rescue and rerun them."""
        began = self._elapsed.monotonic()
        held = list(self._ledger.held.values())
        if held:
            ids = [h.job.id for h in held]
            attempts = [h.job.attempts for h in held]
            still = set(await self._heartbeat(ids, attempts, self._now() + self._lease))
            for h in held:
                if h.job.id not in still and h.state in LIVE:
                    self._ledger.revoke(h)
        self._ok_at = began  # every lease we hold now runs past began + lease
        self._arm()

    def _arm(self) -> None:
        """(Re-)arm the watchdog: it fires `lease_safe` after the last heartbeat that
        succeeded began (see `_lapsing`)."""
        if self._watch is not None:
            self._watch.cancel()
        delay = max(0.0, self._ok_at + self._safe - self._elapsed.monotonic())
        self._watch = self._elapsed.call_later(delay, self._lapsing)

    def _lapsing(self) -> None:
        """No heartbeat succeeded for most of a lease: our leases may lapse any moment and
        another worker then rescue and rerun these jobs. Give them up first: interrupt the
        running attempts (the store retries them once rescued), drop the unstarted ones."""
        self._watch = None
        live = self._ledger.live()
        if live:
            log.warning(
                "worker %s: no heartbeat succeeded for %.1f s; giving up %d held jobs",
                self._worker_id,
                self._elapsed.monotonic() - self._ok_at,
                len(live),
            )
            for held in live:
                self._ledger.revoke(held)
        # Whatever we hold from now on is claimed from now on, under a fresh lease.
        self._ok_at = self._elapsed.monotonic()
        self._arm()


__all__ = ["Heartbeat", "LeaseKeeper"]
