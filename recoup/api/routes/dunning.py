"""The /v1/dunning routes: failures in, invoices and their timelines, outcomes, payments and
card updates, and the tenant's settings.

Route handlers translate HTTP to `recoup.recovery.Dunning` calls and nothing more; the
authenticated tenant scopes every call, so another tenant's invoice reads as absent (404).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from starlette.requests import Request
from starlette.responses import Response

from recoup.api import operator_actions
from recoup.api.deps import Acting, Api, Post, Tenant
from recoup.api.fast_posts import fast_post
from recoup.api.fast_route import with_fast_path
from recoup.api.idempotent import PostContext, json_response
from recoup.api.routes.common import (
    CHECKED,
    ERRORS,
    MAX_ID_LENGTH,
    NO_NUL,
    Cursor,
    Id,
    Limit,
    link,
)
from recoup.api.state import ApiState
from recoup.api.token_cache import StaleToken
from recoup.dunning.invoice import InvoiceState
from recoup.recovery.records import KEEP
from recoup.recovery.store import InvoiceFilter
from recoup.wire.dunning import (
    FailureIn,
    InvoiceCancelIn,
    InvoiceOut,
    InvoicePageOut,
    OutcomeIn,
    TimelineOut,
)
from recoup.wire.dunning_settings import SettingsIn, SettingsOut

router = APIRouter(prefix="/v1/dunning", responses=ERRORS, tags=["dunning"], dependencies=CHECKED)


_INVOICE = {"invoice_id": "$response.body#/invoice_id"}
INVOICE_LINKS = {
    "GetInvoice": link("GET", "/v1/dunning/invoices/{invoice_id}", **_INVOICE),
    "MarkPaid": link("POST", "/v1/dunning/invoices/{invoice_id}/paid", **_INVOICE),
    "PaymentMethodUpdated": link(
        "POST", "/v1/dunning/invoices/{invoice_id}/payment-method-updated", **_INVOICE
    ),
    "ReportFirstOutcome": link(
        "POST",
        "/v1/dunning/invoices/{invoice_id}/attempts/{attempt}/outcome",
        **_INVOICE,
        attempt="$response.body#/attempts/0/attempt",
    ),
    "GetFirstAttemptJob": link(
        "GET", "/v1/jobs/{job_id}", job_id="$response.body#/attempts/0/job_id"
    ),
}


def report_failure(body: FailureIn, ctx: Post, api: Api) -> Response:
    """Hand a failed charge to Recoup: it plans the retries with the tenant's policy and
    schedules every planned attempt as a job (201). The same failure again answers 200
    with the same invoice and changes nothing; another failure of an invoice already in
    dunning is a 409."""
    return _report_failure(body, ctx, api)


def _report_failure(
    body: FailureIn, ctx: PostContext, api: ApiState, *, atomic: bool = False
) -> Response:
    """`atomic`: the charge URL's check asks no DNS, so the service's work is plain writes of
    the keys' own database, run with the key's claim and stored answer in one transaction."""
    report = body.to_report()

    def operation() -> tuple[int, InvoiceOut]:
        invoice, created = api.dunning.report_failure(ctx.tenant, report)
        return (201 if created else 200), InvoiceOut.of(invoice)

    return ctx.run_with_status(operation, atomic=atomic)


async def fast_report_failure(request: Request) -> Response | None:
    """`POST /v1/dunning/failures` without dependency solving (`recoup.api.fast_posts`), the
    service called as the declared route calls it, in one transaction unless the charge URL's
    check may ask DNS (`_may_look_up`); None for what the declared route answers itself, a
    token whose epoch moved included."""
    post = await fast_post(request, FailureIn)
    if post is None:
        return None
    api: ApiState = request.app.state.api
    try:
        atomic = not _may_look_up(post.body, api)
        return await api.threads.run(_report_failure, post.body, post.ctx, api, atomic=atomic)
    except StaleToken:
        return None  # checked before the key's claim: nothing written; the token read afresh


def _may_look_up(body: FailureIn, api: ApiState) -> bool:
    """Whether the SSRF guard may resolve a name for the failure's charge URL: the one given,
    or the tenant's default, which is only read inside the service (unknown here)."""
    guard = api.scheduler.ssrf
    return guard.looks_up(body.charge_url) if body.charge_url else not guard.allow_private


# As `@router.post` would declare it, with a fast path in front (`fast_report_failure`).
router.add_api_route(
    "/failures",
    report_failure,
    methods=["POST"],
    status_code=201,
    response_model=InvoiceOut,
    responses={
        201: {"description": "A new invoice in dunning.", "links": INVOICE_LINKS},
        200: {
            "model": InvoiceOut,
            "description": "The same failure again: unchanged.",
            "links": INVOICE_LINKS,
        },
    },
    route_class_override=with_fast_path(fast_report_failure),
)


@router.get("/invoices", response_model=InvoicePageOut)
def list_invoices(
    api: Api,
    tenant: Tenant,
    state: InvoiceState | None = None,
    customer_id: Annotated[str | None, Query(min_length=1, max_length=100, pattern=NO_NUL)] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Response:
    """Invoices in dunning, oldest first, a page at a time."""
    page = api.dunning.list_invoices(
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
def get_invoice(tenant: Tenant, invoice_id: Id, api: Api) -> Response:
    """The invoice's timeline: its plan, each attempt with its outcome and run log, and
    every event in order."""
    return json_response(200, TimelineOut.of_timeline(api.dunning.timeline(tenant, invoice_id)))


MAX_ATTEMPT = 1000  # the attempt numbers a path may name


def report_outcome(
    invoice_id: Id,
    attempt: Annotated[int, Path(ge=1, le=MAX_ATTEMPT)],
    body: OutcomeIn,
    ctx: Post,
    api: Api,
) -> Response:
    """Report an attempt's outcome later (for charge endpoints that answered 202).
    Reporting the same outcome twice changes nothing."""
    return _report_outcome(invoice_id, attempt, body, ctx, api)


def _report_outcome(
    invoice_id: str, attempt: int, body: OutcomeIn, ctx: PostContext, api: ApiState
) -> Response:
    def operation() -> InvoiceOut:
        return InvoiceOut.of(
            api.dunning.report_outcome(
                ctx.tenant,
                invoice_id,
                attempt,
                body.outcome,
                decline_code=body.decline_code,
                advice_code=body.advice_code,
            )
        )

    # Plain writes of the keys' own database: the key's claim, the transition and its jobs,
    # and the stored answer in one transaction (`PostContext.run`'s `atomic`).
    return ctx.run(200, operation, atomic=True)


async def fast_report_outcome(request: Request) -> Response | None:
    """`report_outcome` without dependency solving, one hop to a thread (`recoup.api.fast_posts`),
    the service called as the declared route calls it; None for what the declared route
    answers itself: a path parameter it would refuse or read otherwise, a token whose epoch
    moved included."""
    params = request.path_params
    invoice_id, number = params["invoice_id"], params["attempt"]
    # Only the forms the declared route reads as they are (no sign, no leading zero).
    if not 0 < len(invoice_id) <= MAX_ID_LENGTH or "\x00" in invoice_id:
        return None
    if not (number.isascii() and number.isdigit() and str(int(number)) == number):
        return None
    attempt = int(number)
    if not 1 <= attempt <= MAX_ATTEMPT:
        return None
    post = await fast_post(request, OutcomeIn)
    if post is None:
        return None
    try:
        api: ApiState = request.app.state.api
        return await api.threads.run(_report_outcome, invoice_id, attempt, post.body, post.ctx, api)
    except StaleToken:
        return None  # checked first in the unit: nothing written; the token read afresh


# As `@router.post` would declare it, with a fast path in front (`fast_report_outcome`).
router.add_api_route(
    "/invoices/{invoice_id}/attempts/{attempt}/outcome",
    report_outcome,
    methods=["POST"],
    response_model=InvoiceOut,
    route_class_override=with_fast_path(fast_report_outcome),
)


@router.post("/invoices/{invoice_id}/paid", response_model=InvoiceOut)
def mark_paid(invoice_id: Id, ctx: Post, api: Api, by: Acting) -> Response:
    """The invoice was paid out of band: the remaining attempts are cancelled. Recorded with
    the token that said so (the invoice's timeline shows it), in the same transaction."""
    return ctx.run(
        200, lambda: InvoiceOut.of(operator_actions.mark_paid(api, by, invoice_id).value)
    )


@router.post("/invoices/{invoice_id}/payment-method-updated", response_model=InvoiceOut)
def payment_method_updated(invoice_id: Id, ctx: Post, api: Api) -> Response:
    """The customer has a new or corrected payment method: one prompt retry (awaiting the
    customer) or a re-plan from now (retrying)."""
    return ctx.run(
        200, lambda: InvoiceOut.of(api.dunning.payment_method_updated(ctx.tenant, invoice_id))
    )


@router.post("/invoices/{invoice_id}/cancel", response_model=InvoiceOut)
def cancel_invoice(
    invoice_id: Id, body: InvoiceCancelIn, ctx: Post, api: Api, by: Acting
) -> Response:
    """Stop dunning the invoice without a payment: it ends `cancelled`
    (`invoice.dunning_cancelled`), its scheduled attempts are cancelled and nothing is charged
    for it again. An invoice already recovered, exhausted or cancelled is answered as it is.
    A stop is recorded with the token that asked, in the same transaction."""

    def stop() -> InvoiceOut:
        done = operator_actions.stop_invoice(api, by, invoice_id, reason=body.reason)
        return InvoiceOut.of(done.value)

    return ctx.run(200, stop)


@router.get("/settings", response_model=SettingsOut)
def get_settings(tenant: Tenant, api: Api) -> Response:
    return json_response(
        200,
        SettingsOut.of(
            api.dunning.settings(tenant),
            api.intake.tenant_settings.settings(tenant),
            api.hosted.charge_with(tenant),
            api.emails.settings(tenant),
        ),
    )


@router.put("/settings", response_model=SettingsOut)
def put_settings(body: SettingsIn, tenant: Tenant, api: Api) -> Response:
    """Replace the tenant's policy (TOML text), event URL, default charge URL, policy
    experiment, the Stripe intake's default zone and the email settings (what is not given is
    cleared); set or remove the Stripe endpoint secret and the SMTP URL (not given: kept).
    Everything is validated before anything is stored."""
    secret = (
        body.stripe_webhook_secret if "stripe_webhook_secret" in body.model_fields_set else KEEP
    )
    intake = api.intake.tenant_settings.settled(
        tenant, stripe_webhook_secret=secret, default_timezone=body.default_timezone
    )
    charging = api.hosted.settled(
        tenant,
        charge_with=KEEP if body.charge_with is None else body.charge_with,
        api_key=KEEP if body.stripe_api_key is None else body.stripe_api_key,
    )
    emails = api.emails.settled(
        tenant,
        smtp_url=body.smtp_url if "smtp_url" in body.model_fields_set else KEEP,
        email_from=body.email_from,
        reply_to=body.reply_to,
        update_card_url=body.update_card_url,
        templates_dir=body.email_templates,
        allow_unsubscribe=body.allow_unsubscribe,
    )
    stored = api.dunning.configure(
        tenant,
        policy_toml=body.policy,
        event_url=body.event_url,
        charge_url=body.charge_url,
        experiment_name=body.experiment_name,
        experiment_policy_toml=body.experiment_policy,
        experiment_share=body.experiment_share,
    )
    saved_intake = api.intake.tenant_settings.save(intake)
    charged_by = api.hosted.save(charging)
    saved_emails = api.emails.save(emails)
    return json_response(
        200,
        SettingsOut.of(
            stored, saved_intake, "url" if charged_by is None else "stripe", saved_emails
        ),
    )


__all__ = ["router"]
