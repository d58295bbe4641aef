"""Fixtures of the payment tests: a virtual clock, a gateway whose sleeps are recorded (never
slept), a request factory, a synchronous in-process transport to the gateway app, the app
served by uvicorn on a free loopback port, and localstripe (`tests.support_stripe`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp

from recoup.payments import ChargeRequest, SimulatedGateway, create_gateway_app
from recoup.timekeeping.clock import VirtualClock
from tests.support import ServerThread
from tests.support_stripe import localstripe, stripe_sdk  # noqa: F401  (fixtures)

# A Tuesday, outside the payday windows of the 1st and the 15th (3 days each by default).
START = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)
IN_PROCESS_URL = "http://gateway.test"  # never resolved: requests go through the transport

MakeRequest = Callable[..., ChargeRequest]


class RecordedSleep:
    """A `sleep` that records the delays asked for instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


@pytest.fixture
def sleep() -> RecordedSleep:
    return RecordedSleep()


@pytest.fixture
def gateway(clock: VirtualClock, sleep: RecordedSleep) -> SimulatedGateway:
    return SimulatedGateway(clock, seed=1, sleep=sleep)


def make_request(
    key: str = "charge:inv_1:1",
    *,
    invoice_id: str = "inv_1",
    amount: int = 1999,
    currency: str = "usd",
    **fields: Any,
) -> ChargeRequest:
    """A charge request with plausible defaults; `fields` override the rest."""
    return ChargeRequest(
        idempotency_key=key,
        invoice_id=invoice_id,
        customer_id=fields.pop("customer_id", "cus_1"),
        amount=amount,
        currency=currency,
        **fields,
    )


@pytest.fixture
def request_for() -> MakeRequest:
    return make_request


class InProcessTransport(httpx.BaseTransport):
    """A synchronous httpx transport that calls an ASGI app in-process.

    httpx's `ASGITransport` is async-only, and Starlette's TestClient warns (an error here)
    unless the `httpx2` package is installed; this runs each request to completion on a fresh
    event loop instead. The app's sync work still runs in its thread pool, as under uvicorn.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._asgi = httpx.ASGITransport(app=app)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def call() -> httpx.Response:
            response = await self._asgi.handle_async_request(request)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=content)

        return asyncio.run(call())


def in_process_client(gateway: SimulatedGateway) -> httpx.Client:
    """An httpx client whose requests go to `gateway`'s app, in-process."""
    transport = InProcessTransport(create_gateway_app(gateway))
    return httpx.Client(transport=transport, base_url=IN_PROCESS_URL)


@pytest.fixture
def served(clock: VirtualClock) -> Iterator[tuple[SimulatedGateway, str]]:
    """A gateway that really sleeps, served on loopback: `(gateway, base_url)`."""
    gateway = SimulatedGateway(clock, seed=1)
    with ServerThread(create_gateway_app(gateway), lifespan="off") as server:
        yield gateway, server.url
