"""Helpers shared by the test packages: waiting for a condition with a deadline, elapsed time
that a test steps by hand (`ManualElapsed`, the worker's `elapsed=`), and a whole failed
charge with defaults (`charge_failure`)."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import uvicorn

from recoup.api.http_protocols import protocol_class
from recoup.dunning.failure import ChargeFailure

DEADLINE = 30.0  # seconds a test waits for a condition (a loaded machine is slow)
STARTUP_TIMEOUT = 10.0  # seconds a test server may take to start or stop


def charge_failure(
    *,
    failed_at: datetime,
    invoice_id: str = "inv_1",
    customer_id: str = "cus_1",
    amount: int = 1999,
    currency: str = "usd",
    timezone: str = "America/Chicago",
    country: str | None = "US",
    decline_code: str | None = "insufficient_funds",
    advice_code: str | None = None,
    card_fingerprint: str | None = "fp_1",
    card_network: str | None = "visa",
    gateway: str | None = "stripe",
    merchant_id: str | None = "m_1",
) -> ChargeFailure:
    """A failed charge with every field given: 19.99 USD of a US customer in Chicago, on a
    visa card through Stripe, declined for insufficient funds, at the test's own instant.
    A test names only what it is about."""
    return ChargeFailure(
        invoice_id=invoice_id,
        customer_id=customer_id,
        amount=amount,
        currency=currency,
        failed_at=failed_at,
        timezone=timezone,
        country=country,
        decline_code=decline_code,
        advice_code=advice_code,
        card_fingerprint=card_fingerprint,
        card_network=card_network,
        gateway=gateway,
        merchant_id=merchant_id,
    )


def wait_until(
    predicate: Callable[[], bool], timeout: float = DEADLINE, *, interval: float = 0.01
) -> bool:
    """Poll `predicate` until it holds (True) or `timeout` seconds passed (its last answer).
    For conditions that must come true; never to show that something does not happen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


async def eventually(predicate: Callable[[], bool], timeout: float = DEADLINE) -> bool:
    """`wait_until` inside an event loop: the loop runs while it waits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.005)
    return predicate()


@dataclass(order=True)
class ManualTimer:
    when: float
    seq: int
    callback: Callable[[], object] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualElapsed:
    """Elapsed time that moves only on `advance()`: pass it as a worker's `elapsed=`, and the
    worker's heartbeats, lease watchdog, consumer timeouts, maintenance intervals, idle sleeps
    and flush pauses wait for the test. Use it from the worker's event loop."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.armed = 0  # timers armed so far
        self._timers: list[ManualTimer] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self.now

    def call_later(self, seconds: float, callback: Callable[[], object]) -> ManualTimer:
        """A timer at now + `seconds`. One already due runs on the loop's next turn, as on a
        real clock: left for the next `advance()`, a wait that began just after the test
        stepped time would wait for a step that never comes."""
        timer = ManualTimer(self.now + max(seconds, 0.0), next(self._seq), callback)
        self.armed += 1
        if seconds <= 0:
            asyncio.get_running_loop().call_soon(self._run_due, timer)
            return timer
        heapq.heappush(self._timers, timer)
        return timer

    @staticmethod
    def _run_due(timer: ManualTimer) -> None:
        if not timer.cancelled:
            timer.callback()

    def advance(self, seconds: float) -> None:
        """Move time `seconds` forward, running every timer due by then, in order, each at
        its own instant."""
        until = self.now + seconds
        while self._timers and self._timers[0].when <= until:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self.now = max(self.now, timer.when)
            timer.callback()
        self.now = until


def free_socket() -> socket.socket:
    """A socket bound to a free port on 127.0.0.1 (bound before the server starts, so no other
    process can take the port between choosing it and listening)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class PromptServer(uvicorn.Server):
    """uvicorn that stops as soon as it is told. Its own main loop polls `should_exit` every
    0.1 s and its shutdown sleeps 0.1 s more, which every test would pay at teardown: here the
    loop waits on an event, and shutdown waits only for what is still running."""

    _stop: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await self.on_tick(0)
        while not self.should_exit:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), 1.0)
            await self.on_tick(1)  # refreshes the Date header; exits once should_exit is set

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wait_tasks_to_complete(), timeout=5.0)
        if not self.force_exit:
            await self.lifespan.shutdown()

    def stop(self) -> None:
        self.should_exit = True
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)


class ServerThread:
    """An ASGI app served by uvicorn on 127.0.0.1 in a daemon thread: real sockets, real
    concurrency, and a teardown that takes milliseconds."""

    def __init__(self, app: Any, *, lifespan: Literal["on", "off"] = "on") -> None:
        self.sock = free_socket()
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan=lifespan,
            timeout_keep_alive=5,
            ws="none",
            http=protocol_class(),
        )
        self.server = PromptServer(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> ServerThread:
        self.thread.start()
        if (
            not wait_until(
                lambda: self.server.started or not self.thread.is_alive(), STARTUP_TIMEOUT
            )
            or not self.server.started
        ):
            raise RuntimeError("the test server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        self.thread.join(STARTUP_TIMEOUT)
        self.sock.close()


__all__ = [
    "DEADLINE",
    "STARTUP_TIMEOUT",
    "ManualElapsed",
    "ManualTimer",
    "PromptServer",
    "ServerThread",
    "eventually",
    "free_socket",
    "wait_until",
]
