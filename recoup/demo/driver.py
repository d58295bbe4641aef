"""The customers' side of the demo, as jobs on the same test clock as Recoup's own: each renewal
fails at its instant (the billing app charges it, then Recoup is told of the failure), some
cards are replaced later (the gateway learns the new card, then Recoup is told), some invoices
are paid another way (the billing app closes the invoice, then Recoup is told).

One Python handler (its due clock pinned at the event's instant, as in every attempt of a
test clock's batch; the calls to Recoup run in a thread that inherits the pin), one job per
event, in the invoice's job group: so an event runs in due order with the invoice's own
attempts, never beside one of them. The billing app is called through the worker session's
HTTP client (`HandlerContext.http`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import aiohttp

from recoup.demo.population import Customer
from recoup.dunning.invoice import job_group
from recoup.errors import NotFound
from recoup.jobs.handlers import HandlerContext, HandlerRegistry, PermanentError
from recoup.jobs.model import BackoffPolicy, NewJob, PythonTarget
from recoup.payments import GatewayClient
from recoup.recovery.records import FailureReport
from recoup.recovery.service import Dunning
from recoup.timekeeping.instants import format_utc

HANDLER = "demo-customer"
RETRY = BackoffPolicy(max_attempts=10)  # a billing app that answers 503 is asked again
TIMEOUT = 30.0  # seconds for one call to the billing app


def customer_jobs(tenant: str, customers: Sequence[Customer]) -> list[NewJob]:
    """A job per customer event: the renewal, and the card update or payment that follows."""
    jobs = []
    for c in customers:
        events: list[tuple[str, datetime | None]] = [
            ("renewal", c.failed_at),
            ("card_updated", c.card_updated_at),
            ("paid", c.paid_out_of_band_at),
        ]
        jobs += [
            NewJob(
                run_at=at,
                target=PythonTarget(handler=HANDLER),
                tenant=tenant,
                name=f"demo-{kind.replace('_', '-')}-{c.invoice_id}",
                payload={"event": kind, "invoice_id": c.invoice_id},
                retry=RETRY,
                group=job_group(c.invoice_id),
            )
            for kind, at in events
            if at is not None
        ]
    return jobs


class CustomerSide:
    """The handler of the customers' events, against `billing_url` (the example app) and
    `dunning` (Recoup, in this process). `counts` tallies what happened."""

    def __init__(
        self, *, dunning: Dunning, tenant: str, billing_url: str, customers: Sequence[Customer]
    ) -> None:
        self.dunning = dunning
        self.tenant = tenant
        self.billing_url = billing_url
        self.customers = {c.invoice_id: c for c in customers}
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._opened: list[GatewayClient] = []

    def register(self, registry: HandlerRegistry) -> HandlerRegistry:
        registry.add(HANDLER, self.handle)
        return registry

    async def handle(self, ctx: HandlerContext) -> str:
        customer = self.customers.get(str(ctx.payload["invoice_id"]))
        if customer is None:
            raise PermanentError(f"no demo customer {ctx.payload['invoice_id']!r}")
        if ctx.http is None:
            raise PermanentError("the demo's events run in a worker (HandlerContext.http)")
        http = ctx.http().session
        event = str(ctx.payload["event"])
        if event == "renewal":
            outcome = await self._renewal(http, customer)
        elif event == "card_updated":
            outcome = await asyncio.to_thread(self._card_updated, customer)
        elif event == "paid":
            outcome = await self._paid(http, customer)
        else:
            raise PermanentError(f"no demo event {event!r}")
        self.counts[outcome] += 1  # on the event loop: one handler at a time
        return outcome

    async def _post(self, http: aiohttp.ClientSession, path: str, body: Any = None) -> Any:
        timeout = aiohttp.ClientTimeout(total=TIMEOUT)
        async with http.post(self.billing_url + path, json=body, timeout=timeout) as answer:
            answer.raise_for_status()  # a 503 (gateway unavailable) is asked again
            return await answer.json()

    async def _renewal(self, http: aiohttp.ClientSession, c: Customer) -> str:
        """The billing app charges the renewal; the decline goes to Recoup."""
        body = await self._post(
            http,
            "/invoices",
            {
                "id": c.invoice_id,
                "customer_id": c.customer_id,
                "amount": c.amount,
                "currency": c.currency,
                "card_fingerprint": c.card,
                "charge_at": format_utc(c.failed_at),
            },
        )
        charge = body["charge"]
        if body["status"] == "paid" or charge is None:
            return "renewal paid"
        await asyncio.to_thread(self._report_failure, c, charge)
        return "renewal failed"

    def _report_failure(self, c: Customer, charge: dict[str, Any]) -> None:
        self.dunning.report_failure(
            self.tenant,
            FailureReport(
                invoice_id=c.invoice_id,
                customer_id=c.customer_id,
                amount=c.amount,
                currency=c.currency,
                failed_at=c.failed_at,
                timezone=c.timezone,
                country=c.country,
                decline_code=charge["decline_code"],
                advice_code=charge["advice_code"],
                card_fingerprint=c.card,
                card_network=c.network,
                gateway=c.gateway,
                merchant_id=c.merchant_id,
                customer_email=f"{c.customer_id}@customers.example",  # to the demo's sink
            ),
        )

    def _card_updated(self, c: Customer) -> str:
        """The gateway learns the new card (from now: the due clock, pinned at this event),
        then Recoup, which retries promptly."""
        self._gateway().update_card(c.card, at=self.dunning.clock.now())
        try:
            self.dunning.payment_method_updated(self.tenant, c.invoice_id)
        except NotFound:
            return "card updated, not in dunning"
        return "card updated"

    async def _paid(self, http: aiohttp.ClientSession, c: Customer) -> str:
        """The customer pays another way, unless the invoice is paid already."""
        answer = await self._post(http, f"/invoices/{c.invoice_id}/paid")
        if not answer["changed"]:
            return "paid already"
        try:
            await asyncio.to_thread(self.dunning.mark_paid, self.tenant, c.invoice_id)
        except NotFound:
            return "paid out of band, not in dunning"
        return "paid out of band"

    def _gateway(self) -> GatewayClient:
        """A gateway client per thread (the gateway's own admin API, over httpx)."""
        client: GatewayClient | None = getattr(self._local, "gateway", None)
        if client is None:
            client = self._local.gateway = GatewayClient(f"{self.billing_url}/gateway")
            with self._lock:
                self._opened.append(client)
        return client

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for client in opened:
            client.close()


__all__ = ["HANDLER", "CustomerSide", "customer_jobs"]
