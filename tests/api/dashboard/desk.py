"""A dashboard over a store, with what its tests need: tenants with tokens, jobs (some run on
a test clock, so their run logs have rows), schedules, invoices in dunning, and a browser-like
client that signs in through the login form.

Used by the in-process HTTP tests (on both backends) and by the browser tests (one server
per module).
"""

from __future__ import annotations

import asyncio
import html
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI
from starlette.types import ASGIApp

from recoup.api.app import ApiSettings, create_app
from recoup.dunning.invoice import AttemptRecord, AttemptState, Invoice, InvoiceState
from recoup.jobs.handlers import HandlerContext, HandlerRegistry
from recoup.jobs.model import BackoffPolicy, Job, PythonTarget
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.time_travel import TestClock
from recoup.recovery.records import FailureReport
from recoup.recovery.service import Dunning
from recoup.storage import ApiTables, Store, open_api_tables
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import VirtualClock

START = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)  # a Tuesday, 10:00 in Chicago
FLAKY_ERROR = "gateway timed out after 30 s"
CSRF_FIELD = re.compile(r'name="csrf" value="([^"]*)"')


class InProcess(httpx.BaseTransport):
    """A synchronous httpx transport that runs each request through the app on a fresh event
    loop (Starlette's TestClient warns without `httpx2`, an error under this suite's
    warning filter); the app's blocking work still goes to its thread pool, as under
    uvicorn."""

    def __init__(self, app: ASGIApp) -> None:
        self._asgi = httpx.ASGITransport(app=app, raise_app_exceptions=False)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def call() -> httpx.Response:
            response = await self._asgi.handle_async_request(request)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=content)

        return asyncio.run(call())


def csrf_of(html: str) -> str:
    """The CSRF token of the first form on a page."""
    found = CSRF_FIELD.search(html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


@dataclass
class Desk:
    store: Store
    tables: ApiTables
    clock: VirtualClock
    scheduler: Scheduler
    dunning: Dunning
    test_clock: TestClock
    app: FastAPI

    def tenant(self, name: str, *, label: str | None = None) -> str:
        """Create tenant `name` and return a fresh API token of it (labelled `label`)."""
        self.store.ensure_tenant(new_tenant(name, now=START))
        return issue_token(self.tables, name, now=START, label=label).secret

    def job(
        self,
        tenant: str,
        name: str,
        *,
        handler: str = "ok",
        group: str | None = None,
        after: timedelta = timedelta(minutes=5),
    ) -> Job:
        return self.scheduler.enqueue(
            PythonTarget(handler=handler),
            run_at=self.clock.now() + after,
            name=name,
            group=group,
            retry=BackoffPolicy(max_attempts=3, min_backoff=timedelta(seconds=1)),
            tenant=tenant,
        )

    def invoice(
        self,
        tenant: str,
        invoice_id: str,
        *,
        amount: int = 1999,
        failed_at: datetime | None = None,
    ) -> Invoice:
        """An invoice in dunning through the runtime (its failure now, unless given)."""
        invoice, _ = self.dunning.report_failure(
            tenant,
            FailureReport(
                invoice_id=invoice_id,
                customer_id=f"cus_{invoice_id}",
                amount=amount,
                currency="usd",
                failed_at=failed_at or self.clock.now(),
                timezone="America/Chicago",
                country="US",
                decline_code="insufficient_funds",
                gateway="stripe",
                merchant_id="m_1",
                charge_url="http://127.0.0.1:9/charge",  # never called: no attempt comes due
            ),
        )
        return invoice

    def finished(
        self,
        tenant: str,
        invoice_id: str,
        failed_at: datetime,
        *,
        code: str = "insufficient_funds",
        merchant_id: str = "m-big",
        recovered: bool = False,
        attempts: int = 1,
    ) -> Invoice:
        """An invoice that ended before now, stored as the runtime leaves one: `attempts`
        retries that ran a day apart, the last one succeeding when `recovered`."""
        last = failed_at + timedelta(days=attempts)
        made = Invoice(
            tenant=tenant,
            invoice_id=invoice_id,
            customer_id=f"cus-{invoice_id}",
            amount=1000,
            currency="usd",
            failed_at=failed_at,
            timezone="America/Chicago",
            country="US",
            decline_code=code,
            advice_code=None,
            card_fingerprint=None,
            card_network=None,
            gateway="stripe",
            merchant_id=merchant_id,
            charge_url="https://billing.example/charge",
            policy="business-days",
            state=InvoiceState.RECOVERED if recovered else InvoiceState.EXHAUSTED,
            decision="retry",
            reason="test",
            final_action="pause_access",
            attempts=tuple(
                AttemptRecord(
                    attempt=n,
                    at=failed_at + timedelta(days=n),
                    state=(
                        AttemptState.SUCCEEDED
                        if recovered and n == attempts
                        else AttemptState.FAILED
                    ),
                    job_id=f"job-{invoice_id}-{n}",
                    decline_code=None if recovered and n == attempts else code,
                    reported_at=failed_at + timedelta(days=n),
                )
                for n in range(1, attempts + 1)
            ),
            created_at=failed_at,
            updated_at=last,
            recovered_by=f"attempt:{attempts}" if recovered else None,
        )
        stored, _ = self.store.create_invoice(made, [])
        return stored

    def spread(
        self,
        tenant: str,
        prefix: str,
        since: timedelta,
        until: timedelta,
        codes: dict[str, int],
        *,
        merchant_id: str,
    ) -> None:
        """Failed invoices of `merchant_id` (given up, no retry) spread evenly from `since`
        to `until` before now, so many of each decline code."""
        flat = [code for code, n in codes.items() for _ in range(n)]
        start, step = START - since, (since - until) / len(flat)
        for i, code in enumerate(flat):
            self.finished(
                tenant,
                f"{prefix}-{i}",
                start + i * step,
                code=code,
                merchant_id=merchant_id,
                attempts=0,
            )

    def a_month_of_invoices(self, tenant: str, *, merchant_id: str = "m-big") -> None:
        """40 invoices finished over the last month, 30 recovered (by a second retry), and
        one still running."""
        for n in range(40):
            self.finished(
                tenant,
                f"{merchant_id}-{n}",
                START - timedelta(days=40 - n / 2),
                merchant_id=merchant_id,
                recovered=n % 4 != 0,
                attempts=2,
            )
        self.invoice(tenant, f"{merchant_id}-running", failed_at=START - timedelta(days=1))

    def run_for(self, delta: timedelta) -> int:
        """Run every job due in the next `delta` of virtual time (dunning attempts, due days
        later, are left alone). In a thread of its own: the test clock runs an event loop,
        and the browser tests' thread already has Playwright's."""
        with ThreadPoolExecutor(1) as thread:
            return thread.submit(self.test_clock.advance, delta).result()

    def browser(self, *, base_url: str = "http://dashboard.test") -> httpx.Client:
        """A client that keeps cookies, as a browser does, and follows no redirect."""
        return httpx.Client(transport=InProcess(self.app), base_url=base_url)

    def sign_in(self, token: str, *, base_url: str = "http://dashboard.test") -> httpx.Client:
        client = self.browser(base_url=base_url)
        form = client.get("/login")
        answer = client.post("/login", data={"csrf": csrf_of(form.text), "token": token})
        assert answer.status_code == 303, answer.text
        return client


def make_desk(store: Store) -> Desk:
    clock = VirtualClock(START)
    registry = HandlerRegistry()

    @registry.register("ok", inline=True)
    def ok(ctx: HandlerContext) -> str:
        return "done"

    @registry.register("flaky", inline=True)
    def flaky(ctx: HandlerContext) -> str:
        if ctx.attempt == 1:
            raise RuntimeError(FLAKY_ERROR)
        return "done"

    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    dunning = Dunning(scheduler, store)
    test_clock = TestClock(clock, scheduler.worker(handlers=registry), store, schedules=store)
    settings = ApiSettings(ssrf=SsrfGuard(allow_private=True), prune_every=None)
    app = create_app(store, clock=clock, settings=settings, scheduler=scheduler, dunning=dunning)
    return Desk(store, open_api_tables(store), clock, scheduler, dunning, test_clock, app)


def error_of(response: httpx.Response) -> str:
    """The error an error page states (`field value: what is allowed`), unescaped."""
    found = re.search(r'<p class="error">(.*?)</p>', response.text, re.S)
    assert found, "not an error page"
    return html.unescape(found.group(1))


def page_text(response: httpx.Response) -> str:
    """A page's text without its tags, whitespace squeezed (what a reader sees)."""
    text = re.sub(r"<[^>]+>", " ", response.text)
    return re.sub(r"\s+", " ", text)


__all__ = [
    "FLAKY_ERROR",
    "START",
    "Desk",
    "InProcess",
    "csrf_of",
    "error_of",
    "make_desk",
    "page_text",
]
