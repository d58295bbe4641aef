"""A dunning runtime on a test clock, over each backend, with a charge endpoint and an event
receiver served on 127.0.0.1 (uvicorn in a thread: the worker sends with aiohttp, which has no
in-process transport) in front of the simulated gateway, which counts every charge."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from recoup.dunning.invoice import Invoice
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.time_travel import TestClock
from recoup.messages.channel import EmailChannel, SmtpChannel, SmtpServer
from recoup.payments import ChargeRequest, ProviderTimeout, ProviderUnavailable, SimulatedGateway
from recoup.recovery.records import FailureReport
from recoup.recovery.runtime import dunning_runtime
from recoup.recovery.service import Dunning
from recoup.sealed import SecretBox
from recoup.timekeeping.clock import VirtualClock
from tests.storage.conftest import backend, store  # noqa: F401  (the per-backend fixtures)
from tests.support import ServerThread

START = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)  # a Tuesday, 10:00 in Chicago


@dataclass
class ChargeSide:
    """The user's side: a charge endpoint (find by key before charging, as a receiver must)
    and an event receiver. `before_charge` runs inside a request, before the charge;
    `after_charge` may replace the answer (an answer lost on the way back)."""

    gateway: SimulatedGateway
    secret: Callable[[], str]
    cards: dict[str, str] = field(default_factory=dict)  # invoice → card fingerprint
    paid: set[str] = field(default_factory=set)
    requests: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    before_charge: Callable[[dict[str, Any]], None] | None = None
    # How the email handler reaches an SMTP server (a test may put a failing channel here).
    email_channel: Callable[[SmtpServer], EmailChannel] = SmtpChannel
    after_charge: Callable[[dict[str, Any], JSONResponse], JSONResponse] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def verified(self, request: Request, body: bytes) -> dict[str, Any]:
        payload: dict[str, Any] = Webhook(self.secret()).verify(body, dict(request.headers))
        return payload

    async def charge(self, request: Request) -> JSONResponse:
        body = await request.body()
        data = self.verified(request, body)
        assert request.headers["idempotency-key"] == data["idempotency_key"]
        with self.lock:
            self.requests.append(data)
        answer = await asyncio.to_thread(self._charge, data)
        return answer if self.after_charge is None else self.after_charge(data, answer)

    def _charge(self, data: dict[str, Any]) -> JSONResponse:
        key = data["charge_idempotency_key"]
        found = self.gateway.find_charge(key)
        if found is None:
            if data["invoice_id"] in self.paid:
                return JSONResponse({"outcome": "already_handled"})
            if self.before_charge is not None:
                self.before_charge(data)
            try:
                found = self.gateway.charge(
                    ChargeRequest(
                        idempotency_key=key,
                        invoice_id=data["invoice_id"],
                        customer_id=data["customer_id"],
                        amount=data["amount"],
                        currency=data["currency"],
                        card=self.cards.get(data["invoice_id"]),
                        at=datetime.fromisoformat(data["scheduled_at"]),
                    )
                )
            except ProviderTimeout:
                return JSONResponse({"outcome": "pending"})
            except ProviderUnavailable:
                return JSONResponse({"error": "provider unavailable"}, status_code=503)
        if found.status == "succeeded":
            self.paid.add(data["invoice_id"])
            return JSONResponse({"outcome": "succeeded"})
        return JSONResponse(
            {
                "outcome": "failed",
                "decline_code": found.decline_code,
                "advice_code": found.advice_code,
            }
        )

    async def event(self, request: Request) -> JSONResponse:
        body = await request.body()
        payload = self.verified(request, body)
        with self.lock:
            self.events.append({"webhook_id": request.headers["webhook-id"], **payload})
        return JSONResponse({"ok": True})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/charge", self.charge, methods=["POST"]),
                Route("/events", self.event, methods=["POST"]),
            ]
        )

    def event_types(self, invoice_id: str) -> list[str]:
        mine = [e for e in self.events if e["data"]["invoice_id"] == invoice_id]
        return [e["type"] for e in sorted(mine, key=lambda e: int(e["seq"]))]


@dataclass
class Runtime:
    clock: VirtualClock
    store: Any
    dunning: Dunning
    test_clock: TestClock
    side: ChargeSide
    charge_url: str  # the charge endpoint, served on 127.0.0.1

    def fail(
        self,
        invoice_id: str,
        card: str,
        *,
        decline: str = "insufficient_funds",
        at: datetime = START,
        **extra: Any,
    ) -> Invoice:
        self.side.cards[invoice_id] = card
        invoice, _ = self.dunning.report_failure(
            "default",
            FailureReport(
                invoice_id=invoice_id,
                customer_id=f"cus_{invoice_id}",
                amount=1999,
                currency="usd",
                failed_at=at,
                timezone="America/Chicago",
                country="US",
                decline_code=decline,
                card_fingerprint=card,
                card_network="visa",
                **extra,
            ),
        )
        return invoice

    def advance(self, delta: timedelta) -> int:
        return self.test_clock.advance(delta)

    def invoice(self, invoice_id: str) -> Invoice:
        return self.dunning.get("default", invoice_id)


@pytest.fixture
def runtime(store: Any) -> Iterator[Runtime]:  # noqa: F811
    clock = VirtualClock(START)
    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    secret = scheduler.default_tenant().signing_secret
    gateway = SimulatedGateway(clock, sleep=lambda seconds: None)
    side = ChargeSide(gateway=gateway, secret=lambda: secret)
    with ServerThread(side.app()) as served:
        box = SecretBox([os.environ["RECOUP_SECRET_KEY"]])  # opens the SMTP URL, if set
        dunning, handlers = dunning_runtime(
            scheduler, store, box=box, email_channel=lambda server: side.email_channel(server)
        )
        dunning.configure(
            "default",
            policy_toml=None,
            event_url=f"{served.url}/events",
            charge_url=f"{served.url}/charge",
        )
        worker = scheduler.worker(handlers=handlers, concurrency=20)
        test_clock = TestClock(clock, worker, store, schedules=store, before_step=dunning.resync)
        yield Runtime(clock, store, dunning, test_clock, side, f"{served.url}/charge")
