"""What the Stripe client answers (`recoup.payments.stripe_billing`), as values: a pay's or a
look-up's outcome, a failure's facts, a final action's result, a key check. Pure: no SDK, so
a caller that only reads the answers (the hosted charge) needs no `stripe` package."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from recoup.payments.provider import PaymentError

DETAIL_LIMIT = 300  # characters of a human line


class StripeOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    DECLINED = "declined"
    PAID_ELSEWHERE = "paid_elsewhere"  # paid, but not by this call
    CLOSED = "closed"  # void, uncollectible or deleted: nothing left to collect
    ACTION_REQUIRED = "action_required"  # the customer must authenticate
    IN_DOUBT = "in_doubt"  # the call's fate is unknown: look the invoice up
    NOT_CHARGED = "not_charged"  # (look-up) still open, no charge since the one given
    REFUSED = "refused"  # Stripe refused the call itself: nothing moved; fix, don't retry


@dataclass(frozen=True, kw_only=True)
class InvoicePayment:
    """What Stripe says of one invoice, after a pay or a look-up."""

    outcome: StripeOutcome
    invoice_id: str
    invoice_status: str | None  # draft/open/paid/void/uncollectible/deleted, None if unknown
    charge_id: str | None
    decline_code: str | None
    advice_code: str | None  # as stripe_reading reads it (a Mastercard MAC as "mac:NN")
    request_id: str | None  # Stripe's Request-Id of the call, for the run log
    detail: str | None  # a short human line (error message, status)
    hosted_invoice_url: str | None


@dataclass(frozen=True, kw_only=True)
class FailureFacts:
    """What Recoup plans a failed invoice's retries from, read from the invoice, its latest
    payment, its customer and its subscription. A part that could not be read is None, and
    `notes` says why."""

    invoice_id: str
    invoice_status: str | None
    customer_id: str | None
    subscription_id: str | None
    amount_remaining: int | None  # minor units
    currency: str | None
    charge_id: str | None
    decline_code: str | None
    advice_code: str | None
    card_fingerprint: str | None
    card_brand: str | None
    card_network: str | None
    card_country: str | None
    customer_country: str | None  # the invoice's customer_address, else the customer's address
    timezone: str | None  # an IANA name from metadata.timezone (invoice, subscription, customer)
    timezone_source: str | None  # "invoice", "subscription" or "customer"
    hosted_invoice_url: str | None
    request_id: str | None  # of the invoice's read
    notes: tuple[str, ...] = ()


class ActionOutcome(StrEnum):
    DONE = "done"
    ALREADY_DONE = "already_done"  # nothing to do: it was so before the call
    REFUSED = "refused"  # Stripe refused (the invoice is paid, no such object): do not retry
    FAILED = "failed"  # transport, 429 or 5xx: the action may or may not have happened; retry


@dataclass(frozen=True, kw_only=True)
class FinalActionResult:
    action: str  # "mark_uncollectible", "cancel_subscription", …
    object_id: str
    outcome: ActionOutcome
    status: str | None  # the object's status as last seen
    request_id: str | None
    detail: str | None

    @property
    def ok(self) -> bool:
        return self.outcome in (ActionOutcome.DONE, ActionOutcome.ALREADY_DONE)

    @property
    def retry(self) -> bool:
        """Trying again later may help (and is safe: every action reads before it acts)."""
        return self.outcome is ActionOutcome.FAILED


@dataclass(frozen=True, kw_only=True)
class AccountCheck:
    ok: bool
    livemode: bool  # from the key's prefix (sk_live_, rk_live_), confirmed by the answer
    retry: bool  # the check could not reach Stripe: try again
    request_id: str | None
    detail: str | None


class StripeLookupFailed(PaymentError):
    """An invoice could not be read. `retry`: a transport failure (try again); else Stripe
    refused (no such invoice, a key without access)."""

    http_status = 502

    def __init__(self, invoice_id: str, detail: str, *, retry: bool) -> None:
        super().__init__(f"could not read Stripe invoice {invoice_id}: {detail}")
        self.invoice_id = invoice_id
        self.retry = retry


def payment(
    outcome: StripeOutcome,
    invoice_id: str,
    *,
    status: str | None = None,
    charge_id: str | None = None,
    decline_code: str | None = None,
    advice_code: str | None = None,
    request_id: str | None = None,
    detail: str | None = None,
    url: str | None = None,
) -> InvoicePayment:
    return InvoicePayment(
        outcome=outcome,
        invoice_id=invoice_id,
        invoice_status=status,
        charge_id=charge_id,
        decline_code=decline_code,
        advice_code=advice_code,
        request_id=request_id,
        detail=None if detail is None else detail[:DETAIL_LIMIT],
        hosted_invoice_url=url,
    )


__all__ = [
    "DETAIL_LIMIT",
    "AccountCheck",
    "ActionOutcome",
    "FailureFacts",
    "FinalActionResult",
    "InvoicePayment",
    "StripeLookupFailed",
    "StripeOutcome",
    "payment",
]
