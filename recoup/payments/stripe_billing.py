"""Stripe Billing as Recoup collects it: Recoup pays the Stripe invoice itself at each retry
(`POST /v1/invoices/{id}/pay`), looks an invoice up to learn what became of an attempt, reads
the facts of a failure, and takes the final actions of a dunning run. A small client over the
official `stripe` SDK (`stripe.StripeClient`), the only module of the package but the intake
route that imports it.

Idempotency is not left to Stripe. Every pay carries the caller's `Idempotency-Key`, but
Stripe keeps a key for 24 hours only and localstripe ignores keys altogether. The guard is
the invoice itself: Stripe never pays a paid invoice twice, and **a caller that got
`IN_DOUBT` looks the invoice up (`look_up`) before it pays again**, passing the charge it saw
before its attempt (`previous_charge_id`) so that an old decline is not taken for the answer
to the new attempt.

What a pay answers (`StripeOutcome`):

| Stripe says                                               | outcome           |
|-----------------------------------------------------------|-------------------|
| 200, invoice `paid`                                       | `SUCCEEDED`       |
| 402 card error (`decline_code`, else `code`)              | `DECLINED`        |
| 200, invoice still `open`, its latest charge `failed`     | `DECLINED`        |
| `authentication_required`, intent `requires_action`       | `ACTION_REQUIRED` |
| 4xx, and the invoice is `paid` ("already paid")           | `PAID_ELSEWHERE`  |
| invoice `void`, `uncollectible`, or deleted (404)         | `CLOSED`          |
| 4xx, invoice still open (no payment method, bad key, …)   | `REFUSED`         |
| 429, 5xx, timeout, connection error                       | `IN_DOUBT`        |
| (look-up) open, no charge since `previous_charge_id`      | `NOT_CHARGED`     |

The 200 with an open invoice is localstripe's shape of a decline. `REFUSED`: nothing moved
and the same call cannot help (fix the cause first). `IN_DOUBT` is never a decline.

A pay sends no parameter it does not need: off-session is Stripe's default for an invoice
pay, and localstripe answers 500 to a parameter it does not know (`off_session`).

Final actions (`mark_uncollectible`, `cancel_subscription`, `pause_collection`,
`resume_collection`) read the object first and act only when needed, so each is idempotent
whatever became of Stripe's key: done already → `ALREADY_DONE`. Stripe's refusals are
`REFUSED` and transport failures `FAILED` (`retry` true); none raises.

The client is the connection (the SDK's client, its calls as values: `stripe_calls.py`)
holding its two halves: paying and reading invoices (`stripe_invoices.py`) and the final
actions (`stripe_final_actions.py`), which import no SDK. The API key is never logged, never
put in a message (the SDK's error texts are scrubbed of it) and never shown by a repr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import stripe

from recoup.errors import InvalidInput
from recoup.payments.stripe_answers import (
    DETAIL_LIMIT,
    AccountCheck,
    ActionOutcome,
    FailureFacts,
    FinalActionResult,
    InvoicePayment,
    StripeLookupFailed,
    StripeOutcome,
)
from recoup.payments.stripe_calls import Answer, CallError
from recoup.payments.stripe_final_actions import StripeFinalActions
from recoup.payments.stripe_invoices import StripeInvoices
from recoup.payments.stripe_reading import as_list, text

DEFAULT_TIMEOUT = 20.0  # seconds, per request (connect and read): shorter than a lock's hold


class _SdkCalls:
    """The SDK's client of one account, its calls answered as values (`stripe_calls`)."""

    def __init__(self, api_key: str, *, api_base: str | None, timeout: float) -> None:
        self._secret = api_key
        self._http = stripe.RequestsClient(timeout=timeout)
        self._client = stripe.StripeClient(
            api_key,
            base_addresses={"api": api_base} if api_base else {},
            max_network_retries=0,
            http_client=self._http,
        )

    @property
    def v1(self) -> Any:
        return self._client.v1

    def close(self) -> None:
        self._http.close()  # type: ignore[no-untyped-call]  # the SDK leaves it untyped

    def call(self, call: Callable[[], Any]) -> Answer:
        """Run one SDK call; its answer as JSON, or its error. Raises nothing of Stripe's."""
        try:
            found = call()
        except stripe.StripeError as exc:
            return Answer(None, self._error(exc), text(exc.request_id))
        response = found.last_response
        request_id = text(response.request_id) if response is not None else None
        return Answer(found.to_dict(), None, request_id)

    def _error(self, error: stripe.StripeError) -> CallError:
        return CallError(
            detail=self._detail(error),
            transport=_is_transport(error),
            missing=_is_missing(error),
            card_declined=error.http_status == 402 or isinstance(error, stripe.CardError),
            json_body=error.json_body,
        )

    def _detail(self, error: stripe.StripeError) -> str:
        """A short line of the error, scrubbed of the API key."""
        message = error.user_message or type(error).__name__
        if isinstance(error, stripe.APIConnectionError):
            # The SDK wraps the network error in a paragraph of advice: keep the error.
            cause = message.rpartition("(Network error: ")[2].strip()
            message = "network error: " + (cause[:-1] if cause.endswith(")") else cause)
        message = " ".join(message.split())
        status = f"HTTP {error.http_status}: " if error.http_status else ""
        line = f"{status}{message}".replace(self._secret, "[api key]")
        return line[:DETAIL_LIMIT]

    def livemode(self) -> bool:
        return "_live_" in self._secret[:8]


class StripeBilling:
    """A client of one Stripe account (one API key). `api_base` points it elsewhere than
    api.stripe.com (localstripe, a recording server); `timeout` bounds each request. The SDK's
    own retries are off: Recoup retries, after a look-up."""

    def __init__(
        self, api_key: str, *, api_base: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        if not api_key or not api_key.strip():
            raise InvalidInput("api_key", "", "expected a Stripe secret or restricted key")
        if timeout <= 0:
            raise InvalidInput("timeout", timeout, "expected a positive number of seconds")
        self._api_base = api_base
        self._calls = _SdkCalls(api_key, api_base=api_base, timeout=timeout)
        self._invoices = StripeInvoices(self._calls)
        self._actions = StripeFinalActions(self._calls)

    def __repr__(self) -> str:
        return f"StripeBilling(api_base={self._api_base!r}, livemode={self._calls.livemode()})"

    def close(self) -> None:
        self._calls.close()

    def __enter__(self) -> StripeBilling:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Paying and looking up (`stripe_invoices.StripeInvoices`)

    def pay(self, invoice_id: str, *, idempotency_key: str) -> InvoicePayment:
        return self._invoices.pay(invoice_id, idempotency_key=idempotency_key)

    def look_up(self, invoice_id: str, *, previous_charge_id: str | None = None) -> InvoicePayment:
        return self._invoices.look_up(invoice_id, previous_charge_id=previous_charge_id)

    def subscription_of(self, invoice_id: str) -> str | None:
        return self._invoices.subscription_of(invoice_id)

    def failure_facts(self, invoice_id: str) -> FailureFacts:
        return self._invoices.failure_facts(invoice_id)

    # Final actions (`stripe_final_actions.StripeFinalActions`)

    def mark_uncollectible(self, invoice_id: str, *, idempotency_key: str) -> FinalActionResult:
        return self._actions.mark_uncollectible(invoice_id, idempotency_key=idempotency_key)

    def cancel_subscription(
        self, subscription_id: str, *, idempotency_key: str
    ) -> FinalActionResult:
        return self._actions.cancel_subscription(subscription_id, idempotency_key=idempotency_key)

    def pause_collection(self, subscription_id: str, *, idempotency_key: str) -> FinalActionResult:
        return self._actions.pause_collection(subscription_id, idempotency_key=idempotency_key)

    def resume_collection(self, subscription_id: str, *, idempotency_key: str) -> FinalActionResult:
        return self._actions.resume_collection(subscription_id, idempotency_key=idempotency_key)

    def check(self) -> AccountCheck:
        """Verify the key against the API with a call that restricted keys with invoice access
        and localstripe both answer (`GET /v1/invoices?limit=1`)."""
        answer = self._calls.call(lambda: self._calls.v1.invoices.list({"limit": 1}))
        livemode = self._calls.livemode()
        if answer.body is None:
            assert answer.error is not None
            return AccountCheck(
                ok=False,
                livemode=livemode,
                retry=answer.transport,
                request_id=answer.request_id,
                detail=answer.error.detail,
            )
        for invoice in as_list(answer.body.get("data"))[:1]:
            if isinstance(invoice.get("livemode"), bool):
                livemode = invoice["livemode"]
        return AccountCheck(
            ok=True,
            livemode=livemode,
            retry=False,
            request_id=answer.request_id,
            detail="live mode" if livemode else "test mode",
        )


def _is_transport(error: stripe.StripeError) -> bool:
    if isinstance(error, stripe.APIConnectionError | stripe.RateLimitError | stripe.APIError):
        return True
    return error.http_status is None or error.http_status == 429 or error.http_status >= 500


def _is_missing(error: stripe.StripeError) -> bool:
    return error.http_status == 404 or error.code == "resource_missing"


__all__ = [
    "AccountCheck",
    "ActionOutcome",
    "FailureFacts",
    "FinalActionResult",
    "InvoicePayment",
    "StripeBilling",
    "StripeLookupFailed",
    "StripeOutcome",
]
