"""The jobs of the dunning runtime, as Python handlers: an attempt asks the tenant's charge
endpoint for one charge; a deadline ends the wait for a customer.

An attempt re-checks its invoice first: an attempt no longer open, or an invoice recovered or
exhausted, asks for nothing (the backstop behind cancellation), unless the attempt's request
already went out: its job is then never cancelled under it, and a cancelled attempt on a later
try is asked once more, so that a charge made before a crash is heard and credited. Then it
POSTs the charge request, signed with Standard Webhooks and keyed `retry:{invoice}:{n}`, and
turns the answer into a lifecycle message:

| the endpoint answered                               | the attempt                        |
|-----------------------------------------------------|------------------------------------|
| 200 `{"outcome": "succeeded" | "failed" | …}`         | that outcome                       |
| 200 `{"outcome": "closed"}` (voided, written off)    | dunning stopped, not recovered     |
| 200 `{"outcome": "pending"}` (provider timed out)    | pending; asked again, same keys    |
| 202 without an outcome                              | awaiting a report (POST …/outcome) |
| 5xx, 408, 409, 429, timeout, connection error       | asked again with the job's backoff |
| any other 4xx, or a 2xx without a valid outcome     | errored (not a decline)            |
| refused before sending (SSRF guard, malformed URL)  | errored at once, never asked again |

Transport trouble never counts as a decline: the job retries the same attempt, with the same
keys, so the receiver's idempotency makes the repeat harmless.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import aiohttp

from recoup.dunning.invoice import AttemptState, Invoice, InvoiceState
from recoup.dunning.messages import ReportedOutcome
from recoup.dunning.outcomes import idempotency_key
from recoup.errors import RecoupError
from recoup.jobs.handlers import HandlerContext, HandlerRegistry, PermanentError
from recoup.jobs.model import HttpTarget, Job, JobState, Tenant, trusted
from recoup.jobs.signing import SigningKeys
from recoup.jobs.targets import AttemptOutcome, AttemptResult, HttpExecutor
from recoup.recovery.hosted_store import STRIPE_CHARGE_TARGET
from recoup.recovery.job_specs import (
    ATTEMPT_HANDLER,
    ATTEMPT_RETRY,
    ATTEMPT_TIMEOUT,
    DEADLINE_HANDLER,
    FINAL_ACTION_HANDLER,
)
from recoup.recovery.service import Dunning
from recoup.timekeeping.clock import SystemClock
from recoup.timekeeping.instants import format_utc

if TYPE_CHECKING:
    from recoup.recovery.hosted_charging import HostedAnswer, HostedCharger

# what an endpoint may say
ANSWERED = ("succeeded", "failed", "already_handled", "closed", "pending")
_RETRYABLE_STATUS = frozenset({408, 409, 429})  # 409: the receiver holds the key in flight


class AskAgain(RecoupError):
    """Retry this attempt with the job's backoff (same attempt, same keys): raised out of a
    handler like any exception but `PermanentError`, it is retried."""


def charge_request(invoice: Invoice, n: int, at: datetime) -> dict[str, Any]:
    """The JSON body of attempt `n`'s charge request (the contract in the README)."""
    return {
        "invoice_id": invoice.invoice_id,
        "attempt": n,
        "idempotency_key": idempotency_key(invoice.invoice_id, n),
        "charge_idempotency_key": f"charge:{invoice.invoice_id}:{n}",
        "amount": invoice.amount,
        "currency": invoice.currency,
        "customer_id": invoice.customer_id,
        "scheduled_at": format_utc(at),
    }


class AttemptRunner:
    """The two handlers, bound to a `Dunning`."""

    def __init__(
        self,
        dunning: Dunning,
        *,
        wall_clock: Callable[[], datetime] | None = None,
        http_session: Callable[[], aiohttp.ClientSession] | None = None,
        hosted: HostedCharger | None = None,
    ) -> None:
        """Charge requests go out through the worker session's HTTP client
        (`HandlerContext.http`). Outside a worker, or with `http_session` (a test's), each goes
        through a client of its own, closed after it: `http_session` makes that session
        (default: a client guarded by the scheduler's SSRF guard)."""
        self.dunning = dunning
        self._wall_clock = wall_clock or SystemClock().now
        self._http_session = http_session
        self.hosted = hosted  # charges the invoices charged through Stripe (`stripe:`)

    def register(self, registry: HandlerRegistry) -> HandlerRegistry:
        registry.add(ATTEMPT_HANDLER, self.attempt)
        registry.add(DEADLINE_HANDLER, self.deadline)
        registry.add(FINAL_ACTION_HANDLER, self.final_action)
        return registry

    async def _send(self, ctx: HandlerContext, job: Job, keys: SigningKeys | None) -> AttemptResult:
        """One charge request: through the worker session's client, whose connections are
        reused from one attempt to the next (a client of this runner's own would outlive the
        event loop its connections belong to), else through a client made for it."""
        if ctx.http is not None and self._http_session is None:
            return await ctx.http().send(job, secret=keys)
        session = self._http_session() if self._http_session is not None else None
        executor = HttpExecutor(
            guard=self.dunning.scheduler.ssrf, wall_clock=self._wall_clock, session=session
        )
        try:
            return await executor.send(job, secret=keys)
        finally:
            await executor.aclose()
            if session is not None:
                await session.close()

    def _read(self, tenant_id: str, invoice_id: str) -> tuple[Invoice | None, Tenant | None]:
        """The invoice and its tenant (whose secret signs the request), in one thread hop."""
        store = self.dunning.store
        return store.get_invoice(tenant_id, invoice_id), store.get_tenant(tenant_id)

    async def deadline(self, ctx: HandlerContext) -> str:
        invoice_id = str(ctx.payload["invoice_id"])
        invoice = await asyncio.to_thread(self.dunning.deadline, ctx.tenant, invoice_id)
        return f"invoice {invoice.state}"

    async def attempt(self, ctx: HandlerContext) -> str:
        invoice_id, n = str(ctx.payload["invoice_id"]), int(ctx.payload["attempt"])
        dunning = self.dunning
        invoice, tenant = await asyncio.to_thread(self._read, ctx.tenant, invoice_id)
        if invoice is None:
            raise PermanentError(f"no invoice {invoice_id!r}")
        record = invoice.attempt(n)
        if record is None:
            raise PermanentError(f"invoice {invoice_id!r} has no attempt {n}")
        # An attempt cancelled after its request went out (its job is on a later try: a
        # retry, or a rescue after a crash) is asked once more, to hear what became of that
        # request: the endpoint replays its answer under the same key, or says the invoice is
        # settled, and charges nothing new for an invoice no longer open.
        owed = record.state is AttemptState.CANCELLED and ctx.attempt > 1
        if not owed and (
            invoice.state.is_final
            or record.state not in (AttemptState.SCHEDULED, AttemptState.PENDING)
        ):
            return f"not asked: attempt {record.state}, invoice {invoice.state}"
        if tenant is not None and tenant.disabled:
            # Claimed just before its tenant was disabled: no charge now. Its retry is held
            # with the tenant's other jobs until the tenant is enabled again.
            raise AskAgain(f"tenant {ctx.tenant!r} is disabled: not charging")
        outcome: ReportedOutcome
        if invoice.charge_url == STRIPE_CHARGE_TARGET:
            answer = await asyncio.to_thread(self._charge_hosted, invoice, n, not owed)
            outcome, codes, detail = answer.outcome, (answer.decline_code, answer.advice_code), None
            said = answer.summary()
            if answer.outcome == "errored":
                detail = said
        else:
            body = charge_request(invoice, n, record.at)
            result = await self._send(ctx, _request_job(ctx, invoice.charge_url, body), tenant)
            found, codes, detail = _read_answer(result)
            if found is None:
                raise AskAgain(result.error or f"HTTP {result.status_code}")
            # `_read_answer` gives only what an endpoint may say (ANSWERED) or what it found.
            outcome, said = cast(ReportedOutcome, found), f"{found} (HTTP {result.status_code})"
        await asyncio.to_thread(
            dunning.report_outcome,
            ctx.tenant,
            invoice_id,
            n,
            outcome,
            decline_code=codes[0],
            advice_code=codes[1],
            detail=detail,
            seen=invoice,
        )
        if outcome == "pending":
            raise AskAgain(
                f"the provider's answer is pending, asking again with the same keys: {said}"
            )
        if outcome == "errored":
            raise PermanentError(detail or "refused by the charge endpoint")
        return said

    async def final_action(self, ctx: HandlerContext) -> str:
        """A final action at Stripe (`job_specs.final_action_job`), taken only while the
        invoice is still in the state that asked for it: a pause is not taken for an invoice
        recovered meanwhile, nor a resume for one that is not recovered."""
        invoice_id, action = str(ctx.payload["invoice_id"]), str(ctx.payload["action"])
        invoice, _ = await asyncio.to_thread(self._read, ctx.tenant, invoice_id)
        if invoice is None:
            raise PermanentError(f"no invoice {invoice_id!r}")
        wanted = InvoiceState.RECOVERED if action == "resume_access" else InvoiceState.EXHAUSTED
        if invoice.state is not wanted:
            return f"not taken: {action} is for an invoice {wanted}, this one is {invoice.state}"
        return await asyncio.to_thread(self._act_at_stripe, invoice, action, ctx.idempotency_key)

    def _act_at_stripe(self, invoice: Invoice, action: str, key: str | None) -> str:
        from recoup.recovery.hosted_charging import take_action

        charging = self.hosted.charging(invoice.tenant) if self.hosted is not None else None
        if self.hosted is None or charging is None:
            raise AskAgain(f"no Stripe access for tenant {invoice.tenant!r}: {action} waits")
        stripe = self.hosted.accounts.client(charging)
        answer = take_action(
            stripe, invoice.invoice_id, action, key=key or f"final:{invoice.invoice_id}:{action}"
        )
        if answer.done:
            return answer.summary
        if answer.retry:
            raise AskAgain(answer.summary)
        raise PermanentError(answer.summary)

    def _charge_hosted(self, invoice: Invoice, n: int, may_pay: bool) -> HostedAnswer:
        """Attempt `n` charged by Recoup itself, through the tenant's Stripe account."""
        if self.hosted is None:
            raise AskAgain("this process charges no invoice through Stripe (no Stripe access)")
        charging = self.hosted.charging(invoice.tenant)
        if charging is None:
            raise AskAgain(
                f"invoice {invoice.invoice_id!r} is charged through Stripe, and tenant"
                f" {invoice.tenant!r} has no Stripe key (recoup tenants configure"
                " --charge-with stripe --stripe-api-key-file …)"
            )
        return self.hosted.charge(charging, invoice, n, may_pay=may_pay)


def _read_answer(result: AttemptResult) -> tuple[str | None, tuple[Any, Any], str | None]:
    """(outcome, (decline, advice), detail) from the endpoint's answer; outcome None: ask
    again later."""
    status = result.status_code
    if result.outcome is AttemptOutcome.FAILED and status is None:
        # Never sent, and never will be: the SSRF guard refused the charge URL at fire time
        # (its host resolves elsewhere now) or the URL cannot be requested. Asking again would
        # only repeat the refusal for days; the attempt errors now, naming why.
        return "errored", (None, None), f"the charge request was refused: {result.error}"[:500]
    if result.outcome is AttemptOutcome.RETRY or status in _RETRYABLE_STATUS or status is None:
        return None, (None, None), None
    if result.outcome is AttemptOutcome.FAILED:
        return "errored", (None, None), f"HTTP {status}: {result.response_excerpt or ''}"[:500]
    try:
        answer = json.loads(result.response_excerpt or "")
    except ValueError:
        answer = None
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if outcome is None and status == 202:
        return "awaiting_report", (None, None), None
    if outcome not in ANSWERED:
        detail = f"HTTP {status} without a valid outcome (expected one of {ANSWERED})"
        return "errored", (None, None), detail
    assert isinstance(answer, dict)
    codes = (_code(answer.get("decline_code")), _code(answer.get("advice_code")))
    return str(outcome), codes, None


def _code(value: Any) -> str | None:
    return str(value)[:100] if value not in (None, "") else None


def _request_job(ctx: HandlerContext, url: str, body: dict[str, Any]) -> Job:
    """The HTTP request of an attempt as the executor sends jobs: the attempt job's id is the
    `webhook-id` (the same on every repeat), its idempotency key the `Idempotency-Key`."""
    fields: dict[str, Any] = {f.name: None for f in dataclasses.fields(Job)}
    fields.update(
        id=ctx.job_id,
        tenant=ctx.tenant,
        name=ctx.name,
        run_at=ctx.run_at,
        target=HttpTarget(url=url, body=body),
        payload=None,
        idempotency_key=ctx.idempotency_key,
        retry=ATTEMPT_RETRY,
        timeout=ATTEMPT_TIMEOUT,
        state=JobState.RUNNING,
        attempts=ctx.attempt,
        created_at=ctx.run_at,
        updated_at=ctx.run_at,
    )
    return trusted(Job, fields)


__all__ = ["AskAgain", "AttemptRunner", "charge_request"]
