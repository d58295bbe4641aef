"""The /v1/dunning routes (failures in, invoices, outcomes, payments, settings) and /v1/clock
(test clocks: only on a server started with `--clock virtual:…`; a 404 elsewhere).

Route handlers translate HTTP to `recoup.recovery.Dunning` calls and nothing more; the
authenticated tenant scopes every call, so another tenant's invoice reads as absent (404).
"""

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from starlette.responses import Response

from recoup.api.dunning_schemas import (
    ClockIn,
    ClockOut,
    FailureIn,
    InvoiceOut,
    InvoicePageOut,
    OutcomeIn,
    SettingsIn,
    SettingsOut,
    TimelineOut,
)
from recoup.api.idempotent import PostContext, json_response
from recoup.api.schemas import ExactlyOne
from recoup.dunning.invoice import InvoiceState
from recoup.jobs.test_clock import TestClock
from recoup.recovery.service import Dunning
from recoup.recovery.store import InvoiceFilter

NO_NUL = r"^[^\x00]*$"


def dunning_router(
    dunning: Dunning,
    *,
    tenant_of: Callable[..., str],
    posting: Callable[..., Awaitable[PostContext]],
    errors: dict[int | str, Any],
) -> APIRouter:
    """The /v1/dunning routes; `tenant_of` and `posting` are the app's dependencies (the
    authenticated tenant; a POST under its Idempotency-Key)."""
    Tenant = Annotated[str, Depends(tenant_of)]
    Post = Annotated[PostContext, Depends(posting)]
    InvoiceId = Annotated[str, Path(min_length=1, max_length=100, pattern=NO_NUL)]
    router = APIRouter(prefix="/v1/dunning", responses=errors, tags=["dunning"])

    @router.post("/failures", status_code=201, response_model=InvoiceOut)
    def report_failure(body: FailureIn, ctx: Post) -> Response:
        """Hand a failed charge to Recoup: it plans the retries with the tenant's policy and
        schedules every planned attempt as a job (201). The same failure again answers 200
        with the same invoice and changes nothing; another failure of an invoice already in
        dunning is a 409."""
        report = body.to_report()

        def operation() -> tuple[int, InvoiceOut]:
            invoice, created = dunning.report_failure(ctx.tenant, report)
            return (201 if created else 200), InvoiceOut.of(invoice)

        return ctx.run_with_status(operation)

    @router.get("/invoices", response_model=InvoicePageOut)
    def list_invoices(
        tenant: Tenant,
        state: InvoiceState | None = None,
        customer_id: Annotated[
            str | None, Query(min_length=1, max_length=100, pattern=NO_NUL)
        ] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        cursor: Annotated[str | None, Query(min_length=1, max_length=500, pattern=NO_NUL)] = None,
    ) -> Response:
        """Invoices in dunning, oldest first, a page at a time."""
        page = dunning.list_invoices(
            InvoiceFilter(
                tenant=tenant, state=state, customer_id=customer_id, limit=limit, cursor=cursor
            )
        )
        return json_response(
            200,
            InvoicePageOut(
                invoices=[InvoiceOut.of(i) for i in page.invoices], next_cursor=page.next_cursor
            ),
        )

    @router.get("/invoices/{invoice_id}", response_model=TimelineOut)
    def get_invoice(tenant: Tenant, invoice_id: InvoiceId) -> Response:
        """The invoice's timeline: its plan, each attempt with its outcome and run log, and
        every event in order."""
        return json_response(200, TimelineOut.of_timeline(dunning.timeline(tenant, invoice_id)))

    @router.post("/invoices/{invoice_id}/attempts/{attempt}/outcome", response_model=InvoiceOut)
    def report_outcome(
        invoice_id: InvoiceId,
        attempt: Annotated[int, Path(ge=1, le=1000)],
        body: OutcomeIn,
        ctx: Post,
    ) -> Response:
        """Report an attempt's outcome later (for charge endpoints that answered 202).
        Reporting the same outcome twice changes nothing."""
        return ctx.run(
            200,
            lambda: InvoiceOut.of(
                dunning.report_outcome(
                    ctx.tenant,
                    invoice_id,
                    attempt,
                    body.outcome,
                    decline_code=body.decline_code,
                    advice_code=body.advice_code,
                )
            ),
        )

    @router.post("/invoices/{invoice_id}/paid", response_model=InvoiceOut)
    def mark_paid(invoice_id: InvoiceId, ctx: Post) -> Response:
        """The invoice was paid out of band: the remaining attempts are cancelled."""
        return ctx.run(200, lambda: InvoiceOut.of(dunning.mark_paid(ctx.tenant, invoice_id)))

    @router.post("/invoices/{invoice_id}/payment-method-updated", response_model=InvoiceOut)
    def payment_method_updated(invoice_id: InvoiceId, ctx: Post) -> Response:
        """The customer has a new or corrected payment method: one prompt retry (awaiting the
        customer) or a re-plan from now (retrying)."""
        return ctx.run(
            200, lambda: InvoiceOut.of(dunning.payment_method_updated(ctx.tenant, invoice_id))
        )

    @router.get("/settings", response_model=SettingsOut)
    def get_settings(tenant: Tenant) -> Response:
        return json_response(200, SettingsOut.of(dunning.settings(tenant)))

    @router.put("/settings", response_model=SettingsOut)
    def put_settings(body: SettingsIn, tenant: Tenant) -> Response:
        """Replace the tenant's policy (TOML text), event URL and default charge URL."""
        stored = dunning.configure(
            tenant, policy_toml=body.policy, event_url=body.event_url, charge_url=body.charge_url
        )
        return json_response(200, SettingsOut.of(stored))

    return router


def clock_router(
    test_clock: TestClock, *, tenant_of: Callable[..., str], errors: dict[int | str, Any]
) -> APIRouter:
    """GET and POST /v1/clock for a server on a virtual clock."""
    Tenant = Annotated[str, Depends(tenant_of)]
    router = APIRouter(prefix="/v1", responses=errors, tags=["test clock"])

    @router.get("/clock", response_model=ClockOut)
    def read_clock(tenant: Tenant) -> Response:
        return json_response(200, ClockOut(now=test_clock.now()))

    @router.post("/clock", response_model=ClockOut)
    def move_clock(body: ClockIn, tenant: Tenant) -> Response:
        """Move the virtual clock forward by `advance_seconds` or to `to`; returns once every
        job due up to the new instant has run, in due order."""
        if (body.advance_seconds is None) == (body.to is None):
            raise ExactlyOne("advance_seconds", "to")
        if body.to is not None:
            ran = test_clock.advance_to(body.to)
        else:
            assert body.advance_seconds is not None
            ran = test_clock.advance(timedelta(seconds=body.advance_seconds))
        return json_response(200, ClockOut(now=test_clock.now(), ran=ran))

    return router


__all__ = ["clock_router", "dunning_router"]
