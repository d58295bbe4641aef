"""The /v1/intake routes: failures, payments and card updates from a payment provider's
webhooks, turned into the dunning runtime's operations (`recoup.recovery.stripe_intake`).

`POST /v1/intake/stripe/{tenant}` takes Stripe's webhook as Stripe sends it. Stripe cannot
send a bearer token, so the signature is the authentication: the path only selects which
tenant's endpoint secret (`whsec_…`, set with `PUT /v1/dunning/settings` or `recoup tenants
configure --stripe-webhook-secret`) verifies the `Stripe-Signature` header, through the
official `stripe` SDK (`stripe.Webhook.construct_event`, 300 s tolerance). A tenant that does
not exist and one without a secret answer the same 404, so the path tells a caller without
the secret nothing. Nothing is read or written before the signature holds.

Answers: 200 with what was done (a replay: the first delivery's answer, `replayed: true` and
`Idempotent-Replayed: true`); 200 `ignored` for an event the intake does not act on (Stripe
retries anything but a 2xx); 400 for a missing or wrong signature, a timestamp outside the
tolerance, or a body that is no event; 403 for a disabled tenant (after the signature holds;
Stripe retries the event, so it is taken once the tenant is enabled); 404 as above; 409 while
another delivery of the same event is at work (`Retry-After`); 422 when the tenant cannot
take the failure (no charge URL: set one, and Stripe's retry succeeds); 503 without the
`stripe` package (`recoup[stripe]`).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Header, Path, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field
from starlette.responses import Response

from recoup.api.deps import Api
from recoup.api.idempotent import REPLAYED_HEADER, json_response
from recoup.api.problems import ApiProblem
from recoup.api.routes.common import problem_response
from recoup.recovery.stripe_intake import EventInProgress, IntakeAnswer

if TYPE_CHECKING:
    from types import ModuleType

TOLERANCE_SECONDS = 300  # Stripe's own default: older signatures are replays
TENANT_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"  # the tenant names `recoup tenants` accepts

router = APIRouter(prefix="/v1/intake", tags=["intake"])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: problem_response(text)
    for code, text in {
        400: "No or a wrong `Stripe-Signature`, a timestamp outside the tolerance, or a body "
        "that is no Stripe event.",
        403: "The tenant is disabled (Stripe retries: the event is taken once it is enabled).",
        404: "No Stripe intake at this path (no such tenant, or no endpoint secret set).",
        409: "Another delivery of this event is being processed (`Retry-After`).",
        413: "The body is over the size limit.",
        422: "The tenant cannot take the failure (each field named), e.g. no charge URL.",
        503: "The database is unavailable, or the `stripe` package is not installed.",
    }.items()
}


class InvoiceRefOut(BaseModel):
    invoice_id: str
    state: str


class IntakeAnswerOut(BaseModel):
    event_id: str
    type: str
    outcome: str = Field(
        description="dunning_opened | already_in_dunning | attempt_failed | attempt_succeeded "
        "| recovered | already_recovered | not_in_dunning | payment_method_updated | ignored"
    )
    detail: str
    invoices: list[InvoiceRefOut] = Field(description="The invoices acted on, as they now are.")
    replayed: bool = Field(description="The event was processed before: its first answer.")

    @classmethod
    def of(cls, answer: IntakeAnswer) -> IntakeAnswerOut:
        return cls.model_validate(answer.to_json())


def _stripe() -> ModuleType:
    """The `stripe` SDK, imported on first use: the core install has no need of it."""
    try:
        import stripe
    except ImportError:
        raise ApiProblem(
            503,
            "extra-missing",
            "the Stripe intake needs the stripe package: pip install 'recoup[stripe]'",
        ) from None
    return stripe


def verify(payload: bytes, signature: str | None, secret: str) -> Any:
    """The event, parsed, if `signature` is Stripe's for `payload` under `secret` and recent;
    otherwise a 400 problem saying which."""
    stripe = _stripe()
    if not signature:
        raise ApiProblem(400, "invalid-signature", "expected a Stripe-Signature header")
    try:
        stripe.Webhook.construct_event(payload, signature, secret, tolerance=TOLERANCE_SECONDS)
    except stripe.SignatureVerificationError as exc:
        raise ApiProblem(
            400,
            "invalid-signature",
            f"the Stripe-Signature does not verify with the tenant's endpoint secret: "
            f"{exc.user_message or exc}",
        ) from None
    except (ValueError, TypeError, AttributeError):  # not UTF-8, not a JSON object, thin
        raise ApiProblem(
            400, "invalid-event", "expected a Stripe event (snapshot payload) as JSON"
        ) from None
    return json.loads(payload)


@router.post(
    "/stripe/{tenant}",
    response_model=IntakeAnswerOut,
    responses=_RESPONSES,
    summary="Stripe webhooks: failures, payments, card updates",
)
async def stripe_webhook(
    tenant: Annotated[str, Path(min_length=1, max_length=63)],
    request: Request,
    api: Api,
    stripe_signature: Annotated[str | None, Header(alias="Stripe-Signature")] = None,
) -> Response:
    """Receive one Stripe event: `invoice.payment_failed` opens dunning (or is the outcome of
    Recoup's own attempt), `invoice.paid` / `invoice.payment_succeeded` recover the invoice,
    `payment_method.automatically_updated` and `customer.updated` (default payment method
    changed) re-plan the customer's invoices. Each event acts once: a redelivery answers the
    first answer and changes nothing."""
    secret = None
    if re.fullmatch(TENANT_PATTERN, tenant):
        secret = await run_in_threadpool(api.intake.tenant_settings.webhook_secret, tenant)
    if secret is None:
        raise ApiProblem(
            404,
            "no-stripe-intake",
            "no Stripe intake at this path: expected /v1/intake/stripe/{tenant} of a tenant "
            "with a Stripe endpoint secret set",
        )
    event = verify(await request.body(), stripe_signature, secret)
    # After the signature: only Stripe learns that the tenant is disabled. A 4xx, because
    # Stripe delivers the event again for up to three days: nothing is lost if the tenant is
    # enabled within them, and nothing acts for a tenant its operator stopped.
    found = await run_in_threadpool(api.services.scheduler.store.get_tenant, tenant)
    if found is not None and found.disabled_at is not None:
        raise ApiProblem(
            403,
            "tenant-disabled",
            f"tenant {tenant!r} is disabled: the event is not taken (Stripe delivers it again "
            "until the tenant is enabled, for up to three days)",
        )
    try:
        answer = await run_in_threadpool(api.intake.receive, tenant, event)
    except EventInProgress as exc:
        raise ApiProblem(
            409, "event-in-progress", str(exc), headers={"Retry-After": str(exc.retry_after)}
        ) from None
    response = json_response(200, IntakeAnswerOut.of(answer))
    if answer.replayed:
        response.headers[REPLAYED_HEADER] = "true"
    return response


__all__ = ["TOLERANCE_SECONDS", "IntakeAnswerOut", "router", "verify"]
