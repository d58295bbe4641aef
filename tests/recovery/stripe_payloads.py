"""Stripe events shaped like the ones Stripe sends (the fields of its Event, Invoice,
PaymentIntent, Charge, PaymentMethod and Customer objects, before and after API version
2025-03-31.basil), built through the `stripe` SDK's own objects, and signed as Stripe signs
them (`stripe.WebhookSignature`, `t=…,v1=HMAC-SHA256(secret, "{t}.{body}")`)."""

from __future__ import annotations

import copy
import time
from typing import Any

import stripe

CREATED = 1_782_226_800  # 2026-06-23T15:00:00Z
API_VERSION = "2024-06-20"
BASIL = "2025-03-31.basil"


def card_method(*, fingerprint: str = "fp_Q1w2E3r4", brand: str = "visa") -> dict[str, Any]:
    return {
        "id": "pm_1PqRsT2eZvKYlo2C",
        "object": "payment_method",
        "billing_details": {"address": {"country": "US", "postal_code": "60601"}, "name": None},
        "card": {
            "brand": brand,
            "country": "US",
            "exp_month": 8,
            "exp_year": 2027,
            "fingerprint": fingerprint,
            "funding": "credit",
            "last4": "4242",
            "networks": {"available": [brand], "preferred": None},
        },
        "created": CREATED - 86_400 * 300,
        "customer": "cus_QxYz123",
        "livemode": False,
        "metadata": {},
        "type": "card",
    }


def payment_intent(
    *,
    decline_code: str | None = "insufficient_funds",
    code: str = "card_declined",
    advice_code: str | None = None,
    network_advice_code: str | None = None,
    network_decline_code: str | None = None,
    brand: str = "visa",
) -> dict[str, Any]:
    return {
        "id": "pi_3PqRsT2eZvKYlo2C1",
        "object": "payment_intent",
        "amount": 1999,
        "currency": "usd",
        "customer": "cus_QxYz123",
        "status": "requires_payment_method",
        "last_payment_error": {
            "advice_code": advice_code,
            "charge": "ch_3PqRsT2eZvKYlo2C1",
            "code": code,
            "decline_code": decline_code,
            "doc_url": f"https://stripe.com/docs/error-codes/{code.replace('_', '-')}",
            "message": "Your card was declined.",
            "network_advice_code": network_advice_code,
            "network_decline_code": network_decline_code,
            "payment_method": card_method(brand=brand),
            "type": "card_error",
        },
    }


def charge(
    *,
    reason: str | None = "insufficient_funds",
    outcome_type: str = "issuer_declined",
    failure_code: str = "card_declined",
    advice_code: str | None = None,
    network: str = "visa",
) -> dict[str, Any]:
    return {
        "id": "ch_3PqRsT2eZvKYlo2C1",
        "object": "charge",
        "amount": 1999,
        "currency": "usd",
        "customer": "cus_QxYz123",
        "failure_code": failure_code,
        "failure_message": "Your card has insufficient funds.",
        "outcome": {
            "advice_code": advice_code,
            "network_advice_code": None,
            "network_decline_code": "51",
            "network_status": "declined_by_network",
            "reason": reason,
            "risk_level": "normal",
            "seller_message": "The bank returned the decline code `insufficient_funds`.",
            "type": outcome_type,
        },
        "paid": False,
        "payment_method_details": {
            "card": {"brand": network, "fingerprint": "fp_Ch4rg3", "network": network},
            "type": "card",
        },
        "status": "failed",
    }


def invoice(
    invoice_id: str = "in_1PqRsT2eZvKYlo2C",
    *,
    customer: str = "cus_QxYz123",
    amount: int = 1999,
    timezone: str | None = "America/Chicago",
    country: str | None = "US",
    intent: dict[str, Any] | str | None = None,
    charge_object: dict[str, Any] | str | None = None,
    basil: bool = False,
    status: str = "open",
) -> dict[str, Any]:
    """An invoice as an `invoice.*` event carries it: before basil with `charge` and
    `payment_intent` (ids unless given expanded), after basil with `payments`."""
    body: dict[str, Any] = {
        "id": invoice_id,
        "object": "invoice",
        "account_country": "US",
        "amount_due": amount,
        "amount_paid": 0 if status != "paid" else amount,
        "amount_remaining": amount if status != "paid" else 0,
        "attempt_count": 1,
        "attempted": True,
        "billing_reason": "subscription_cycle",
        "collection_method": "charge_automatically",
        "created": CREATED - 3600,
        "currency": "usd",
        "customer": customer,
        "customer_address": None if country is None else {"country": country, "city": "Chicago"},
        "customer_email": "jenny@example.com",
        "lines": {"object": "list", "data": [], "has_more": False, "total_count": 0},
        "livemode": False,
        "metadata": {} if timezone is None else {"timezone": timezone},
        "next_payment_attempt": CREATED + 3 * 86_400,
        "status": status,
    }
    if basil:
        body["parent"] = {
            "type": "subscription_details",
            "subscription_details": {"metadata": {}, "subscription": "sub_1Pq"},
        }
        body["payments"] = {
            "object": "list",
            "data": [
                {
                    "id": "inpay_1Pq",
                    "object": "invoice_payment",
                    "is_default": True,
                    "status": "open",
                    "payment": {
                        "type": "payment_intent",
                        "payment_intent": intent or "pi_3PqRsT2eZvKYlo2C1",
                    },
                }
            ],
            "has_more": False,
        }
    else:
        body["charge"] = charge_object or "ch_3PqRsT2eZvKYlo2C1"
        body["payment_intent"] = intent or "pi_3PqRsT2eZvKYlo2C1"
        body["subscription"] = "sub_1Pq"
        body["subscription_details"] = {"metadata": {}}
    return body


def customer(
    customer_id: str = "cus_QxYz123", *, default_payment_method: str | None = "pm_new"
) -> dict[str, Any]:
    return {
        "id": customer_id,
        "object": "customer",
        "address": {"country": "US"},
        "default_source": None,
        "email": "jenny@example.com",
        "invoice_settings": {
            "custom_fields": None,
            "default_payment_method": default_payment_method,
            "footer": None,
        },
        "livemode": False,
        "metadata": {},
    }


def subscription(
    subscription_id: str = "sub_1Pq",
    *,
    customer: str | dict[str, Any] = "cus_QxYz123",
    status: str = "active",
    cancel_at_period_end: bool = False,
    cancel_at: int | None = None,
    basil: bool = False,
) -> dict[str, Any]:
    """A subscription as a `customer.subscription.*` event carries it: before basil its
    period at the top (`current_period_end`), after basil on each item."""
    period = {"current_period_start": CREATED - 86_400 * 30, "current_period_end": CREATED}
    item: dict[str, Any] = {
        "id": "si_1Pq",
        "object": "subscription_item",
        "price": {"id": "price_1Pq", "object": "price", "unit_amount": 1999, "currency": "usd"},
        "quantity": 1,
    }
    body: dict[str, Any] = {
        "id": subscription_id,
        "object": "subscription",
        "cancel_at": cancel_at,
        "cancel_at_period_end": cancel_at_period_end,
        "canceled_at": CREATED if status == "canceled" else None,
        "collection_method": "charge_automatically",
        "customer": customer,
        "items": {"object": "list", "data": [item], "has_more": False},
        "latest_invoice": "in_1PqRsT2eZvKYlo2C",
        "livemode": False,
        "metadata": {},
        "status": status,
    }
    if basil:
        item.update(period)
    else:
        body.update(period)
    return body


def event(
    type: str,
    obj: dict[str, Any],
    *,
    event_id: str = "evt_1PqRsT2eZvKYlo2CaBcDeFgH",
    created: int = CREATED,
    previous: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    api_version: str = API_VERSION,
    account: str | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {"object": copy.deepcopy(obj)}
    if previous is not None:
        data["previous_attributes"] = previous
    body: dict[str, Any] = {
        "id": event_id,
        "object": "event",
        "api_version": api_version,
        "created": created,
        "data": data,
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": "req_AbC123", "idempotency_key": idempotency_key},
        "type": type,
    }
    if account is not None:
        body["account"] = account
    return body


def payload(body: dict[str, Any]) -> str:
    """The event's JSON as the SDK serializes its `Event` object."""
    return str(stripe.Event.construct_from(body, "sk_test_recoup"))


def signed(body: str, secret: str, *, at: int | None = None) -> dict[str, str]:
    """The headers of a delivery of `body`, signed with `secret` at `at` (now by default)."""
    header = stripe.WebhookSignature.generate_signature_header(
        body, secret, timestamp=int(time.time()) if at is None else at
    )
    return {"Stripe-Signature": header, "Content-Type": "application/json; charset=utf-8"}


__all__ = [
    "API_VERSION",
    "BASIL",
    "CREATED",
    "card_method",
    "charge",
    "customer",
    "event",
    "invoice",
    "payload",
    "payment_intent",
    "signed",
    "subscription",
]
