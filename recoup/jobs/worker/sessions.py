"""The worker's own session (ARCHITECTURE.md, 'Worker sessions'): registered while `run()`
runs, its heartbeat stamped every `session_beat` seconds of elapsed time, and every job the
worker holds given up before any other worker may find it dead and hand those jobs back: so a
job never runs twice at once.

- The watchdog: when no beat succeeded for the session's `expires_after` (the rule observers
  apply on this backend) minus `SESSION_MARGIN`, counted from when the last good beat began,
  every held job is given up. A beat that fails proves nothing; only the watchdog decides.
- A beat that finds the registration gone (found dead, or its id taken over) gives every job
  up at once.
- A beat that finds the session's connection lost (PostgreSQL: `pg_terminate_backend`, a
  restart of the database) pauses claims and opens a new session at once: opened before the
  watchdog fires, it keeps the held jobs running (nobody could act on them before the grace);
  otherwise the watchdog gives them up.
- While the session is down the worker claims nothing (`gate`); a claim in flight when jobs
  were given up is given back unstarted (`Firing.claim_once`: the epoch changed). The next
  session opened after jobs were given up hands back, as lost, whatever still runs under the
  worker's id (those attempts: not spent), after writing the completions of attempts that
  ended before.

Given-up attempts are cancelled like revoked ones but their completions are never written
(`Held.abandoned`): the jobs come back as lost runs, by whoever hands them back first. A sync
handler's thread cannot be stopped and finishes unobserved, as on a timeout.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from recoup.jobs.store import JobStore
from recoup.jobs.worker.clocks import Elapsed, Timer, sleep
from recoup.jobs.worker.ledger import Ledger
from recoup.jobs.worker_records import Beat, SessionRules, WorkerInfo, WorkerSession

log = logging.getLogger("recoup.worker")

T = TypeVar("T")


class SessionKeeper:
    """Opens, beats and closes the worker's session on threads of its own (a busy store pool
    never delays a beat). `up` while claims may be made; `epoch` changes whenever held jobs
    are given up, so a claim can tell whether the jobs it got may still be run."""

    def __init__(
        self,
        *,
        store: JobStore,
        worker: WorkerInfo,
        rules: SessionRules,
        ledger: Ledger,
        flush: Callable[[], Awaitable[None]],
        now: Callable[[], datetime],
        elapsed: Elapsed,
        every: float,
        margin: float,
        opened: Callable[[], None],
    ) -> None:
        self._store = store
        self._worker = worker
        self._rules = rules
        self._ledger = ledger
        self._flush = flush
        self._now = now
        self._elapsed = elapsed
        self._every = every
        self._margin = margin
        self._opened = opened  # called when claims may resume
        self.up = False
        self.epoch = 0
        self._session: WorkerSession | None = None
        self._ever_opened = False  # later opens replace this worker's own lost session
        self._hand_back = False  # jobs were given up: the next session hands them back
        self._holds = 0.0  # seconds after a good beat began within which the session holds
        self._watch: Timer | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._complained = False  # one warning per outage, not one per beat

    def gate(self) -> int | None:
        """The epoch claims are made under now, or None while claims wait."""
        return self.epoch if self.up else None

    async def start(self) -> None:
        """Open the session (one try; `run` keeps trying)."""
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recoup-session")
        self._ever_opened = self._hand_back = False
        await self._open()

    async def run(self) -> None:
        """Beat, or open a new session, every `every` seconds until cancelled."""
        try:
            while True:
                await sleep(self._elapsed, self._every)
                session = self._session
                if session is None:
                    await self._open()
                    continue
                began = self._elapsed.monotonic()
                try:
                    found = await self._call(session.beat)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    self._complain("its session heartbeat failed", failed=True)
                    continue
                if session is not self._session:
                    continue  # let go meanwhile (the watchdog)
                if found is Beat.ALIVE:
                    self._complained = False
                    self._arm(began)
                elif found is Beat.LOST:
                    log.warning(
                        "worker %s: its session's connection was lost; claims wait, "
                        "connecting again",
                        self._worker.id,
                    )
                    self._let_go()
                    await self._open()
                else:
                    self._give_up("its session was found dead or its id taken over")
        finally:
            self._disarm()

    async def close(self) -> None:
        """End the session gracefully (the worker stopped): its registration is deleted."""
        self._disarm()
        session = self._session
        self._let_go(drop=False)
        try:
            if session is not None:
                await self._call(session.close)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("worker %s: closing its session failed", self._worker.id, exc_info=True)
            if session is not None:
                _drop_quietly(session)
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = None

    async def _open(self) -> None:
        began = self._elapsed.monotonic()
        replacing = self._ever_opened
        opening = self._submit(
            self._store.open_worker_session,
            self._worker,
            now=self._now(),
            rules=self._rules,
            replacing=replacing,
        )
        try:
            session = await asyncio.wrap_future(opening)
        except asyncio.CancelledError:
            # The call runs on in its thread: a session it opens must not live on unowned
            # (its lock would keep this worker id "alive").
            opening.add_done_callback(_drop_opened)
            raise
        except Exception:
            self._complain("opening its session failed", failed=True)
            return
        if session is None:
            self._complain("another live session holds its worker id; waiting for it to end")
            return
        # The watchdog may have given the jobs up while this session was opening: checked
        # after every await, and hand-backs repeated until none was needed meanwhile.
        while self._hand_back:
            self._hand_back = False
            try:
                await self._flush()  # attempts that ended before: their results, not lost
            except asyncio.CancelledError:
                raise
            except Exception:
                log.debug("worker %s: flush before handing back failed", self._worker.id)
            try:
                handed = await self._call(session.hand_back, now=self._now())
            except asyncio.CancelledError:
                _drop_quietly(session)
                raise
            except Exception:
                self._hand_back = True
                _drop_quietly(session)
                self._complain("handing back its given-up jobs failed", failed=True)
                return
            if handed:
                log.warning(
                    "worker %s: handed back %d jobs it gave up", self._worker.id, len(handed)
                )
        self._session = session
        self._holds = max(0.0, session.expires_after.total_seconds() - self._margin)
        self._ever_opened = True
        self._complained = False
        self.up = True
        self._arm(began)
        if replacing:
            log.warning("worker %s: session open again; claiming resumes", self._worker.id)
        self._opened()

    def _arm(self, began: float) -> None:
        """A beat (or an opening) that began at elapsed `began` succeeded: the session holds
        until `began + expires_after - margin` at least. (Re-)arm the watchdog for then."""
        self._disarm()
        delay = max(0.0, began + self._holds - self._elapsed.monotonic())
        self._watch = self._elapsed.call_later(delay, self._lapsing)

    def _lapsing(self) -> None:
        self._watch = None
        self._give_up("no session heartbeat succeeded in time")

    def _give_up(self, reason: str) -> None:
        """The worker may be found dead any moment: give up every held job now, stop claiming,
        let the session go; `run` opens a new one, which hands the jobs back."""
        self._disarm()
        self._let_go()
        self._hand_back = True
        self.epoch += 1
        given_up = self._ledger.abandon()
        log.warning(
            "worker %s: %s; gave up %d held jobs, claims wait for a new session",
            self._worker.id,
            reason,
            given_up,
        )

    def _let_go(self, *, drop: bool = True) -> None:
        """No session now: claims wait (held jobs run on, the watchdog still armed)."""
        session, self._session = self._session, None
        self.up = False
        if session is not None and drop:
            _drop_quietly(session)

    def _disarm(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _complain(self, what: str, *, failed: bool = False) -> None:
        if not self._complained:
            self._complained = True
            log.warning("worker %s: %s", self._worker.id, what, exc_info=failed)

    def _submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        assert self._executor is not None
        return self._executor.submit(functools.partial(fn, *args, **kwargs))

    async def _call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await asyncio.wrap_future(self._submit(fn, *args, **kwargs))


def _drop_opened(opening: Future[WorkerSession | None]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        session = opening.result()
        if session is not None:
            _drop_quietly(session)


def _drop_quietly(session: WorkerSession) -> None:
    """Close a session's connection on a thread of its own: a connection to an unreachable
    database may take its time, and nothing waits for it."""

    def drop() -> None:
        try:
            session.drop()
        except Exception:
            log.debug("dropping a lost session failed", exc_info=True)

    threading.Thread(target=drop, name="recoup-session-drop", daemon=True).start()


__all__ = ["SessionKeeper"]
