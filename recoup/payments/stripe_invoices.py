"""Paying a Stripe invoice and reading it: the pay, the look-up of what became of an
attempt, the subscription an invoice bills and the facts of its failure, every answer a value
(`stripe_answers.py`), by the rules of `stripe_billing.py`'s docstring (what a pay answers,
and why a caller in doubt looks the invoice up before it pays again). Through the connection
of `stripe_calls.StripeCalls`: no SDK here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recoup.errors import InvalidInput
from recoup.payments.stripe_answers import (
    FailureFacts,
    InvoicePayment,
    StripeLookupFailed,
    StripeOutcome,
)
from recoup.payments.stripe_answers import payment as make_payment
from recoup.payments.stripe_calls import Answer, CallError, StripeCalls
from recoup.payments.stripe_reading import (
    PaymentCodes,
    amount_remaining,
    as_list,
    as_map,
    codes_of_charge,
    codes_of_error,
    id_of,
    lower,
    metadata_timezone,
    subscription_of,
    text,
)

URL_LIMIT = 2000  # characters of a hosted invoice URL
# Codes by which Stripe says the customer must authenticate (3-D Secure) before a charge.
ACTION_CODES = frozenset(
    {"authentication_required", "invoice_payment_intent_requires_action", "requires_action"}
)
CLOSED_STATUSES = frozenset({"void", "uncollectible", "deleted"})


@dataclass(frozen=True)
class _Payment:
    """The invoice's latest payment: its PaymentIntent and Charge as far as known."""

    intent: Mapping[str, Any]
    charge: Mapping[str, Any]
    unread: str | None = None  # why a part could not be read (a transport failure)


class StripeInvoices:
    """The invoices of one Stripe account, paid and read through `calls`."""

    def __init__(self, calls: StripeCalls) -> None:
        self._calls = calls

    # Paying and looking up

    def pay(self, invoice_id: str, *, idempotency_key: str) -> InvoicePayment:
        """Pay the invoice now with the customer's default payment method (the table in the
        module docstring). Never raises for what Stripe answers."""
        if not idempotency_key:
            raise InvalidInput("idempotency_key", idempotency_key, "expected a non-empty key")
        answer = self._calls.call(
            lambda: self._calls.v1.invoices.pay(
                invoice_id, options={"idempotency_key": idempotency_key}
            )
        )
        if answer.body is not None:
            return self._read_invoice(invoice_id, answer.body, answer.request_id, None)
        assert answer.error is not None
        return self._pay_failed(invoice_id, answer.error, answer.request_id)

    def look_up(self, invoice_id: str, *, previous_charge_id: str | None = None) -> InvoicePayment:
        """What became of the invoice: paid → `SUCCEEDED`; void, uncollectible or deleted →
        `CLOSED`; open with a failed latest charge → `DECLINED`; open with no charge, or none
        newer than `previous_charge_id` (the charge the caller saw before its attempt) →
        `NOT_CHARGED`; the look-up itself failing → `IN_DOUBT`."""
        answer = self._retrieve_invoice(invoice_id)
        if answer.body is not None:
            return self._read_invoice(
                invoice_id, answer.body, answer.request_id, previous_charge_id
            )
        assert answer.error is not None
        if answer.error.missing:
            return make_payment(
                StripeOutcome.CLOSED,
                invoice_id,
                status="deleted",
                request_id=answer.request_id,
                detail="no such invoice (deleted)",
            )
        return make_payment(
            StripeOutcome.IN_DOUBT,
            invoice_id,
            request_id=answer.request_id,
            detail=f"look-up failed: {answer.error.detail}",
        )

    def subscription_of(self, invoice_id: str) -> str | None:
        """The subscription the invoice bills (None: a one-off invoice), from one read of the
        invoice. Raises `StripeLookupFailed` if the invoice cannot be read (a deleted one too:
        an invoice in dunning is finalized, and never deleted at Stripe)."""
        answer = self._retrieve_invoice(invoice_id)
        if answer.body is None:
            assert answer.error is not None
            raise StripeLookupFailed(invoice_id, answer.error.detail, retry=answer.transport)
        return subscription_of(answer.body)

    def failure_facts(self, invoice_id: str) -> FailureFacts:
        """The facts of the invoice's failure (see `FailureFacts`). Raises
        `StripeLookupFailed` if the invoice itself cannot be read; a customer, subscription or
        payment method that cannot be read leaves its fields None, noted."""
        answer = self._retrieve_invoice(invoice_id)
        if answer.body is None:
            assert answer.error is not None
            raise StripeLookupFailed(invoice_id, answer.error.detail, retry=answer.transport)
        inv, notes = answer.body, []
        payment = self._latest_payment(inv)
        if payment.unread:
            notes.append(payment.unread)
        codes = _codes(payment)
        card, card_unread = self._card_of(payment)
        if card_unread:
            notes.append(card_unread)
        customer_id, subscription_id = id_of(inv.get("customer")), subscription_of(inv)
        customer = self._related(inv.get("customer"), "customers", notes)
        subscription = as_map(inv.get("subscription_details")) or as_map(
            as_map(inv.get("parent")).get("subscription_details")
        )
        if not as_map(subscription.get("metadata")):
            subscription = self._related(subscription_id, "subscriptions", notes)
        holders = (("invoice", inv), ("subscription", subscription), ("customer", customer))
        timezone, source = metadata_timezone(holders, notes) or (None, None)
        country = text(as_map(inv.get("customer_address")).get("country"), 2) or text(
            as_map(customer.get("address")).get("country"), 2
        )
        return FailureFacts(
            invoice_id=invoice_id,
            invoice_status=text(inv.get("status")),
            customer_id=customer_id,
            subscription_id=subscription_id,
            amount_remaining=amount_remaining(inv),
            currency=lower(inv.get("currency")),
            charge_id=id_of(payment.charge),
            decline_code=codes.decline,
            advice_code=codes.advice,
            card_fingerprint=codes.fingerprint or text(card.get("fingerprint")),
            card_brand=lower(card.get("brand")),
            card_network=codes.network or lower(card.get("network")) or lower(card.get("brand")),
            card_country=text(card.get("country"), 2),
            customer_country=None if country is None else country.upper(),
            timezone=timezone,
            timezone_source=source,
            hosted_invoice_url=text(inv.get("hosted_invoice_url"), URL_LIMIT),
            request_id=answer.request_id,
            notes=tuple(notes),
        )

    # Reading Stripe's answers

    def _pay_failed(
        self, invoice_id: str, error: CallError, request_id: str | None
    ) -> InvoicePayment:
        detail = error.detail
        if error.transport:
            return make_payment(
                StripeOutcome.IN_DOUBT, invoice_id, request_id=request_id, detail=detail
            )
        body = as_map(as_map(error.json_body).get("error"))
        intent = as_map(body.get("payment_intent"))
        charge_id = id_of(body.get("charge"))
        if {text(body.get("code")), text(body.get("decline_code"))} & ACTION_CODES or intent.get(
            "status"
        ) == "requires_action":
            return make_payment(
                StripeOutcome.ACTION_REQUIRED,
                invoice_id,
                status="open",
                charge_id=charge_id,
                request_id=request_id,
                detail=detail,
            )
        if error.card_declined:
            codes = codes_of_error(body)
            return make_payment(
                StripeOutcome.DECLINED,
                invoice_id,
                status="open",
                charge_id=charge_id,
                decline_code=codes.decline or text(body.get("code")),
                advice_code=codes.advice,
                request_id=request_id,
                detail=detail,
            )
        # Refused before anything moved: the invoice's state says why (localstripe answers a
        # void invoice's pay with a bare "Bad request").
        now = self.look_up(invoice_id)
        if now.outcome is StripeOutcome.SUCCEEDED or (
            now.outcome is StripeOutcome.IN_DOUBT and "already paid" in detail.lower()
        ):
            outcome = StripeOutcome.PAID_ELSEWHERE
        elif now.outcome is StripeOutcome.CLOSED:
            outcome = StripeOutcome.CLOSED
        else:
            outcome = StripeOutcome.REFUSED
        return InvoicePayment(
            outcome=outcome,
            invoice_id=invoice_id,
            invoice_status=now.invoice_status,
            charge_id=now.charge_id if outcome is StripeOutcome.PAID_ELSEWHERE else None,
            decline_code=None,
            advice_code=None,
            request_id=request_id,
            detail=detail,
            hosted_invoice_url=now.hosted_invoice_url,
        )

    def _read_invoice(
        self,
        invoice_id: str,
        inv: Mapping[str, Any],
        request_id: str | None,
        previous_charge_id: str | None,
    ) -> InvoicePayment:
        status = text(inv.get("status"))
        url = text(inv.get("hosted_invoice_url"), URL_LIMIT)

        def answer(outcome: StripeOutcome, detail: str, **fields: Any) -> InvoicePayment:
            return make_payment(
                outcome,
                invoice_id,
                status="deleted" if inv.get("deleted") is True else status,
                request_id=request_id,
                detail=detail,
                url=url,
                **fields,
            )

        if inv.get("deleted") is True or status in CLOSED_STATUSES:
            return answer(StripeOutcome.CLOSED, f"the invoice is {status or 'deleted'}")
        payment = self._latest_payment(inv)
        charge_id = id_of(payment.charge)
        if status == "paid":
            return answer(StripeOutcome.SUCCEEDED, "the invoice is paid", charge_id=charge_id)
        if payment.unread:
            return answer(StripeOutcome.IN_DOUBT, payment.unread)
        if payment.intent.get("status") == "requires_action":
            return answer(StripeOutcome.ACTION_REQUIRED, "the customer must authenticate")
        if charge_id is None or charge_id == previous_charge_id:
            return answer(StripeOutcome.NOT_CHARGED, f"the invoice is {status}, not charged")
        charge_status = text(payment.charge.get("status"))
        if charge_status == "failed":
            codes = _codes(payment)
            return answer(
                StripeOutcome.DECLINED,
                text(payment.charge.get("failure_message")) or "the charge failed",
                charge_id=charge_id,
                decline_code=codes.decline,
                advice_code=codes.advice,
            )
        return answer(
            StripeOutcome.IN_DOUBT,
            f"the invoice is {status} and its latest charge {charge_status}",
            charge_id=charge_id,
        )

    def _latest_payment(self, inv: Mapping[str, Any]) -> _Payment:
        """The invoice's latest PaymentIntent and Charge. Before API version 2025-03-31.basil
        (and at localstripe) the invoice names them (`payment_intent`, `charge`); from basil
        on its payments are listed apart (`GET /v1/invoice_payments?invoice=`)."""
        intent: Any = inv.get("payment_intent")
        charge: Any = inv.get("charge")
        invoice_id = text(inv.get("id"))
        if "payment_intent" not in inv and "charge" not in inv and invoice_id is not None:
            listed = self._calls.call(
                lambda: self._calls.v1.invoice_payments.list({"invoice": invoice_id, "limit": 1})
            )
            if listed.transport:
                return _Payment({}, {}, "the invoice's payments could not be read")
            for entry in as_list(as_map(listed.body).get("data"))[:1]:
                payment = as_map(entry.get("payment"))
                intent, charge = payment.get("payment_intent"), payment.get("charge")
        if isinstance(intent, str):
            read = self._calls.call(lambda: self._calls.v1.payment_intents.retrieve(intent))
            if read.transport:
                return _Payment({}, {}, "the invoice's payment intent could not be read")
            intent = as_map(read.body)
        intent = as_map(intent)
        if charge is None:
            charge = intent.get("latest_charge")
        if isinstance(charge, str):
            read = self._calls.call(lambda: self._calls.v1.charges.retrieve(charge))
            if read.transport:
                return _Payment(intent, {"id": charge}, "the invoice's charge could not be read")
            charge = read.body or {"id": charge}
        return _Payment(intent, as_map(charge))

    def _card_of(self, payment: _Payment) -> tuple[Mapping[str, Any], str | None]:
        """The card of the payment: the charge's `payment_method_details.card`, else its
        payment method's `card` (localstripe has no details on its charges)."""
        card = as_map(as_map(payment.charge.get("payment_method_details")).get("card"))
        if card:
            return card, None
        method = payment.charge.get("payment_method") or payment.intent.get("payment_method")
        if isinstance(method, Mapping):
            return as_map(method.get("card")), None
        method_id = text(method)
        if method_id is None:
            return {}, None
        read = self._calls.call(lambda: self._calls.v1.payment_methods.retrieve(method_id))
        if read.body is None:
            return {}, "the payment method could not be read"
        return as_map(read.body.get("card")), None

    def _related(self, ref: Any, kind: str, notes: list[str]) -> Mapping[str, Any]:
        """An object the invoice refers to (expanded already, or read by its id)."""
        if isinstance(ref, Mapping):
            return ref
        ref_id = text(ref)
        if ref_id is None:
            return {}
        service = getattr(self._calls.v1, kind)
        read = self._calls.call(lambda: service.retrieve(ref_id))
        if read.body is None:
            notes.append(f"the {kind[:-1]} {ref_id} could not be read")
            return {}
        return read.body

    def _retrieve_invoice(self, invoice_id: str) -> Answer:
        return self._calls.call(lambda: self._calls.v1.invoices.retrieve(invoice_id))


def _codes(payment: _Payment) -> PaymentCodes:
    """The failed payment's codes: the intent's `last_payment_error`, richer on Stripe, else
    the charge's; the generic `card_declined` when nothing more specific is given (the
    decline is still told, as `decline_code` else `code`)."""
    error = as_map(payment.intent.get("last_payment_error"))
    from_charge = codes_of_charge(payment.charge)
    codes = codes_of_error(error) if error else from_charge
    decline = (
        codes.decline
        or from_charge.decline
        or text(error.get("code"))
        or text(payment.charge.get("failure_code"))
    )
    return PaymentCodes(
        decline=decline,
        advice=codes.advice or from_charge.advice,
        fingerprint=codes.fingerprint or from_charge.fingerprint,
        network=codes.network or from_charge.network,
    )


__all__ = ["ACTION_CODES", "CLOSED_STATUSES", "URL_LIMIT", "StripeInvoices"]
