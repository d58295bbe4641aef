"""Reading what Stripe says of a failed payment (JSON, any API version), shared by the Stripe
client (`recoup.payments.stripe_billing`) and the webhook intake
(`recoup.recovery.stripe_events`), so a decline reads the same whichever way it reached us.
Pure: no SDK, no network; a field of the wrong type reads as absent, never as an error.

- a PaymentIntent's `last_payment_error` (and a 402 card error, which has the same fields):
  `decline_code`, else `code` unless it is the generic `card_declined`, else
  `network_decline_code`; `advice_code`, else a Mastercard card's `network_advice_code` as
  `mac:NN`; the card's `fingerprint` and `brand` from its `payment_method.card`;
- a Charge: `outcome.reason` when `outcome.type` is `issuer_declined` or `blocked`, else
  `failure_code` unless it is `card_declined`, else `outcome.network_decline_code`;
  `outcome.advice_code`, else `outcome.network_advice_code` as above; the card from
  `payment_method_details.card` (its `network`, else its `brand`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from recoup.errors import InvalidInput
from recoup.timekeeping.zones import zone

ENDED_SUBSCRIPTIONS = frozenset({"canceled", "incomplete_expired"})  # a subscription gone
GENERIC_DECLINE = "card_declined"  # Stripe's error code of every issuer decline: says nothing


@dataclass(frozen=True)
class PaymentCodes:
    """The decline and advice codes of one failed payment, and the card it was tried on."""

    decline: str | None = None
    advice: str | None = None
    fingerprint: str | None = None
    network: str | None = None


def codes_of_error(error: Mapping[str, Any]) -> PaymentCodes:
    """The codes of a PaymentIntent's `last_payment_error`, or of a 402 card error's body."""
    card = as_map(as_map(error.get("payment_method")).get("card"))
    network = lower(card.get("brand"))
    return PaymentCodes(
        decline=first(
            error.get("decline_code"),
            specific(error.get("code")),
            error.get("network_decline_code"),
        ),
        advice=advice_of(error.get("advice_code"), error.get("network_advice_code"), network),
        fingerprint=text(card.get("fingerprint")),
        network=network,
    )


def codes_of_charge(charge: Mapping[str, Any]) -> PaymentCodes:
    """The codes of a failed Charge (its `outcome`, `failure_code` and card)."""
    outcome = as_map(charge.get("outcome"))
    reason = (
        outcome.get("reason") if outcome.get("type") in ("issuer_declined", "blocked") else None
    )
    card = as_map(as_map(charge.get("payment_method_details")).get("card"))
    network = lower(card.get("network")) or lower(card.get("brand"))
    return PaymentCodes(
        decline=first(
            reason, specific(charge.get("failure_code")), outcome.get("network_decline_code")
        ),
        advice=advice_of(outcome.get("advice_code"), outcome.get("network_advice_code"), network),
        fingerprint=text(card.get("fingerprint")),
        network=network,
    )


def advice_of(advice: Any, network_advice: Any, network: str | None) -> str | None:
    """Stripe's advice code; else a Mastercard card's network advice code (a MAC)."""
    found = text(advice)
    mac = text(network_advice)
    if found is None and mac is not None and network == "mastercard":
        return f"mac:{mac}"
    return found


# Reading JSON of any shape without failing on it


def as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def text(value: Any, limit: int = 100) -> str | None:
    """A non-empty string field of at most `limit` characters (what the invoice columns
    hold), else None: an id is never cut into another id."""
    if not isinstance(value, str) or "\x00" in value:
        return None
    value = value.strip()
    return value if 0 < len(value) <= limit else None


def lower(value: Any) -> str | None:
    found = text(value, 40)
    return None if found is None else found.lower()


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def id_of(value: Any) -> str | None:
    """An id, or an expanded object's `id`."""
    return text(value.get("id")) if isinstance(value, Mapping) else text(value)


def specific(code: Any) -> str | None:
    """An error code that says more than "declined"."""
    found = text(code)
    return None if found == GENERIC_DECLINE else found


def first(*values: Any) -> str | None:
    for value in values:
        found = text(value)
        if found is not None:
            return found
    return None


def subscription_ended(subscription: Mapping[str, Any]) -> str | None:
    status = subscription.get("status")
    return f"the subscription is {status}" if status in ENDED_SUBSCRIPTIONS else None


def subscription_of(inv: Mapping[str, Any]) -> str | None:
    """The invoice's subscription: `subscription` before basil, `parent.subscription_details`
    after."""
    found = id_of(inv.get("subscription"))
    if found is None:
        details = as_map(as_map(inv.get("parent")).get("subscription_details"))
        found = id_of(details.get("subscription"))
    return found


def amount_remaining(inv: Mapping[str, Any]) -> int | None:
    remaining = as_int(inv.get("amount_remaining"))
    if remaining is not None:
        return remaining
    due, paid = as_int(inv.get("amount_due")), as_int(inv.get("amount_paid"))
    return None if due is None else due - (paid or 0)


def metadata_timezone(
    holders: Iterable[tuple[str, Mapping[str, Any]]], notes: list[str]
) -> tuple[str, str] | None:
    """The first IANA zone named by a `timezone` key in the holders' metadata, with the
    holder's name (`"invoice"`, `"subscription"`, …); a name that is no zone is noted and
    passed over."""
    for where, holder in holders:
        name = text(as_map(holder.get("metadata")).get("timezone"))
        if name is None:
            continue
        try:
            zone(name)
        except InvalidInput:
            notes.append(f"the {where}'s metadata timezone {name[:64]!r} is no IANA zone")
            continue
        return name, where
    return None


__all__ = [
    "ENDED_SUBSCRIPTIONS",
    "GENERIC_DECLINE",
    "PaymentCodes",
    "advice_of",
    "amount_remaining",
    "as_int",
    "as_list",
    "as_map",
    "codes_of_charge",
    "codes_of_error",
    "first",
    "id_of",
    "lower",
    "metadata_timezone",
    "specific",
    "subscription_ended",
    "subscription_of",
    "text",
]
