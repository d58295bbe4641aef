"""The chaos itself, on a timeline drawn from the seed: a random worker killed with SIGKILL
every few seconds and started again under a new id; on PostgreSQL, every connection of
Recoup's processes to the run's database terminated (`pg_terminate_backend`) at evenly spaced
moments, and, where the run owns its server, the server crashed (immediate stop), left down
for a moment and started again, halfway through; the simulated gateway unavailable for a
window (an `UNAVAILABLE` fault with no scope, which refuses charges and lookups alike, put in
force and taken out in real time).

The gateway stands in for the receiver being unavailable: its state (charges per key, the
double-charge count the audit reads) lives in the billing app's process, so stopping that
process would erase the very evidence the run checks. The billing app answers 503 while its
gateway is down, which Recoup sees as an unavailable receiver: the attempt is asked again with
its backoff, never counted as a decline.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from bench.chaos.databases import HARNESS_APP_NAME, Database
from bench.chaos.own_server import OwnServer
from bench.chaos.processes import Processes
from recoup.payments import Fault, FaultKind
from recoup.payments.wire import fault_to_json

SLOTS = ("w1", "w2")


@dataclass(frozen=True, kw_only=True)
class ChaosPlan:
    """What to break, and when (seconds from the start of the chaos)."""

    duration: float
    kill_every: tuple[float, float] = (2.0, 4.0)  # seconds between kills, drawn uniformly
    restart_after: float = 0.5  # seconds a killed slot stays empty
    pg_terminations: int = 2  # evenly spaced in the duration (PostgreSQL only)
    db_restarts: int = 0  # a server of the run's own crashed and started again, this often
    db_down_seconds: float = 2.0  # how long it stays down each time
    outage_at: float = 0.4  # fraction of the duration
    outage_seconds: float = 3.0


@dataclass(frozen=True, kw_only=True)
class Kill:
    worker_id: str
    at: datetime  # wall clock (UTC), comparable with the run log's instants
    monotonic: float


@dataclass(frozen=True, kw_only=True)
class Termination:
    at: datetime
    connections: int  # backends terminated


@dataclass
class ChaosLog:
    """What the chaos did; `kills` is appended to while it runs (read it under `lock`)."""

    kills: list[Kill] = field(default_factory=list)
    terminations: list[Termination] = field(default_factory=list)
    outages: list[tuple[datetime, datetime]] = field(default_factory=list)
    db_restarts: list[float] = field(default_factory=list)  # seconds the server was away
    errors: list[str] = field(default_factory=list)
    skipped_kills: int = 0  # no worker was registered at the moment
    lock: threading.Lock = field(default_factory=threading.Lock)


Action = Callable[[], None]


class Chaos:
    """Runs the plan's timeline in a thread of its own (`start`, then `stop`).
    `is_registered(worker_id)`: whether that worker's session is in the workers table."""

    def __init__(
        self,
        plan: ChaosPlan,
        *,
        processes: Processes,
        database: Database,
        billing_url: str,
        seed: int,
        is_registered: Callable[[str], bool],
        server: OwnServer | None = None,
    ) -> None:
        self.plan = plan
        self.processes = processes
        self.database = database
        self.billing_url = billing_url
        self.rng = random.Random(seed)
        self.is_registered = is_registered
        self.server = server
        self.log = ChaosLog()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)
        self._outage_id: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the chaos: the outage lifted, every worker slot running again."""
        self._stop.set()
        self._thread.join()
        if self._outage_id is not None:
            self._end_outage()
        for slot in SLOTS:
            if not self.processes.workers[slot].alive:
                self.processes.start_worker(slot)

    def timeline(self) -> list[tuple[float, str, Action]]:
        """(seconds from the start, what, action), in order."""
        plan = self.plan
        events: list[tuple[float, str, Action]] = []
        at = self.rng.uniform(*plan.kill_every)
        while at < plan.duration:
            events.append((at, "kill a worker", self._kill))
            events.append((at + plan.restart_after, "restart", self._restart))
            at += self.rng.uniform(*plan.kill_every)
        if self.database.backend == "postgres":
            for k in range(1, plan.pg_terminations + 1):
                at = plan.duration * k / (plan.pg_terminations + 1)
                events.append((at, "terminate connections", self._terminate))
        if self.server is not None:
            for k in range(plan.db_restarts):
                # Halfway between the terminations (1/3 and 2/3 with the default two).
                at = plan.duration * (2 * k + 1) / (2 * plan.db_restarts)
                events.append((at, "restart the database", self._restart_database))
        if plan.outage_seconds > 0:
            start = plan.duration * plan.outage_at
            events.append((start, "gateway outage", self._begin_outage))
            events.append((start + plan.outage_seconds, "gateway back", self._end_outage))
        return sorted(events, key=lambda e: e[0])

    def _run(self) -> None:
        began = time.monotonic()
        for at, what, action in self.timeline():
            if self._stop.wait(max(0.0, began + at - time.monotonic())):
                return
            try:
                action()
            except Exception as exc:  # the chaos goes on; the report lists what failed
                with self.log.lock:
                    self.log.errors.append(f"{what}: {exc}")

    def _kill(self) -> None:
        """SIGKILL a random worker among those whose session is registered (one still
        importing holds nothing worth losing); none such: this kill is skipped."""
        slots = [
            slot
            for slot in SLOTS
            if self.processes.workers[slot].alive
            and self.is_registered(self.processes.worker_id(slot))
        ]
        if not slots:
            with self.log.lock:
                self.log.skipped_kills += 1
            return
        slot = self.rng.choice(slots)
        now = datetime.now(UTC)
        mono = time.monotonic()
        worker_id = self.processes.kill_worker(slot)
        with self.log.lock:
            self.log.kills.append(Kill(worker_id=worker_id, at=now, monotonic=mono))

    def _restart(self) -> None:
        for slot in SLOTS:
            if not self.processes.workers[slot].alive:
                self.processes.start_worker(slot)

    def _terminate(self) -> None:
        import psycopg

        assert self.database.admin_url is not None
        with psycopg.connect(self.database.admin_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()"
                " AND application_name IS DISTINCT FROM %s",
                (self.database.name, HARNESS_APP_NAME),
            ).fetchone()
        count = int(row[0]) if row else 0
        with self.log.lock:
            self.log.terminations.append(Termination(at=datetime.now(UTC), connections=count))

    def _restart_database(self) -> None:
        assert self.server is not None
        away = self.server.restart(self.plan.db_down_seconds)
        with self.log.lock:
            self.log.db_restarts.append(away)

    def _begin_outage(self) -> None:
        fault = Fault(kind=FaultKind.UNAVAILABLE, reason="chaos: gateway outage")
        answer = httpx.post(f"{self.billing_url}/gateway/faults", json=fault_to_json(fault))
        answer.raise_for_status()
        self._outage_id = str(answer.json()["id"])
        self._outage_began = datetime.now(UTC)

    def _end_outage(self) -> None:
        if self._outage_id is None:
            return
        outage, self._outage_id = self._outage_id, None
        httpx.delete(f"{self.billing_url}/gateway/faults/{outage}").raise_for_status()
        with self.log.lock:
            self.log.outages.append((self._outage_began, datetime.now(UTC)))


__all__ = ["SLOTS", "Chaos", "ChaosLog", "ChaosPlan", "Kill", "Termination"]
