"""Reading a Stripe event (its JSON, already verified) into what the dunning runtime does
with it. Pure: no clock, no network; the event's own fields and the tenant's default zone
decide everything (`recoup.recovery.stripe_intake` acts on the result).

| event                                   | becomes                                          |
|-----------------------------------------|--------------------------------------------------|
| `invoice.payment_failed`                | `InvoiceFailed`: a failure (or attempt n failed) |
| `invoice.paid`, `invoice.payment_succeeded` | `InvoicePaid` (or attempt n succeeded)        |
| `payment_method.automatically_updated`  | `CardUpdated` for the method's customer          |
| `customer.updated`, default method changed | `CardUpdated` for that customer               |
| anything else                           | `Ignored`, saying why                            |

The fields of a failure, as Stripe sends them (both the invoice shapes before and after API
version 2025-03-31.basil):

- invoice `id`, `customer` (an id, or the expanded customer's `id`), `currency`, and the
  amount still owed: `amount_remaining`, else `amount_due` (nothing owed: ignored);
- the failure instant is the event's `created` (Stripe creates the event when the charge
  fails; every redelivery carries the same one);
- decline and advice codes come from the failed payment when the event carries it expanded:
  the invoice's `payment_intent` (before basil) or the PaymentIntent of an entry of its
  `payments` (basil), whose `last_payment_error` gives `decline_code`, else `code` (unless it
  is the generic `card_declined`), else `network_decline_code`; `advice_code`, else a
  Mastercard card's `network_advice_code` as `mac:NN`; the card's `fingerprint` and `brand`
  come from its `payment_method.card`. Else the invoice's (or payment's) expanded `charge`:
  `outcome.reason` when `outcome.type` is `issuer_declined` or `blocked`, else
  `failure_code` (unless `card_declined`), else `outcome.network_decline_code`;
  `outcome.advice_code`, else `outcome.network_advice_code` as above; the card from
  `payment_method_details.card`. Stripe sends the payment as an id only, unexpanded, in a
  webhook: then the failure has no decline code (planned as "no decline code: soft");
  (this reading of codes is `recoup.payments.stripe_reading`'s, which the Stripe client
  shares, so a decline reads the same from a webhook and from a pay);
- zone: invoice `metadata.timezone`, else the subscription's (`subscription_details` before
  basil, `parent.subscription_details` after), else the tenant's default; a name that is no
  IANA zone is passed over, noted;
- country: invoice `customer_address.country` when the holidays package knows it, else none
  (the policy's `calendar.default_country` then applies);
- merchant id: the Connect account of the event (`account`), if any.

An event caused by Recoup's own attempt n is recognised by the idempotency key of the API
request behind it (`request.idempotency_key`): the charge request gives the endpoint
`charge_idempotency_key` = `charge:{invoice}:{n}`, and an endpoint that passes it to Stripe
makes the webhook of that charge the attempt's outcome rather than a new failure or an
out-of-band payment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from recoup.errors import InvalidInput
from recoup.payments.stripe_reading import PaymentCodes as _Codes
from recoup.payments.stripe_reading import as_int as _int
from recoup.payments.stripe_reading import as_list as _list
from recoup.payments.stripe_reading import as_map as _map
from recoup.payments.stripe_reading import codes_of_charge as _from_charge
from recoup.payments.stripe_reading import codes_of_error as _from_intent_error
from recoup.payments.stripe_reading import id_of as _id_of
from recoup.payments.stripe_reading import text as _text
from recoup.timekeeping.calendar import BusinessCalendar
from recoup.timekeeping.zones import zone

PAID_TYPES = ("invoice.paid", "invoice.payment_succeeded")
CARD_TYPES = (
    "payment_method.automatically_updated",
    "payment_method.card_automatically_updated",  # its name before API version 2020-08-27
    "customer.updated",
)
SUPPORTED = ("invoice.payment_failed", *PAID_TYPES, *CARD_TYPES)
MAX_UNIX = 10**11  # year 5138: any instant a plan can start from (and no overflow)
_CHARGE_KEY = re.compile(r"charge:(?P<invoice>.+):(?P<attempt>[1-9][0-9]{0,3})")


@dataclass(frozen=True, kw_only=True)
class InvoiceFailed:
    invoice_id: str
    customer_id: str
    amount: int
    currency: str
    failed_at: datetime
    timezone: str
    country: str | None
    decline_code: str | None
    advice_code: str | None
    card_fingerprint: str | None
    card_network: str | None
    merchant_id: str | None
    attempt: int | None  # Recoup's attempt behind the event, if any
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class InvoicePaid:
    invoice_id: str
    attempt: int | None  # Recoup's attempt behind the event, if any


@dataclass(frozen=True, kw_only=True)
class CardUpdated:
    customer_id: str
    why: str


@dataclass(frozen=True, kw_only=True)
class Ignored:
    why: str


Reading = InvoiceFailed | InvoicePaid | CardUpdated | Ignored


@dataclass(frozen=True, kw_only=True)
class EventHead:
    """What every event has: its id, type, creation instant and object."""

    id: str
    type: str
    created: datetime
    object: Mapping[str, Any]
    raw: Mapping[str, Any]


def event_head(event: Any) -> EventHead:
    """The head of a Stripe event; `InvalidInput` naming the field if it has none."""
    if not isinstance(event, Mapping):
        raise InvalidInput("event", type(event).__name__, "expected a JSON object")
    event_id, event_type, created = event.get("id"), event.get("type"), event.get("created")
    if not isinstance(event_id, str) or not event_id:
        raise InvalidInput("id", event_id, "expected the event's id (evt_…)")
    if not isinstance(event_type, str) or not event_type:
        raise InvalidInput("type", event_type, "expected the event's type")
    if isinstance(created, bool) or not isinstance(created, int) or not 0 <= created < MAX_UNIX:
        raise InvalidInput("created", created, "expected the event's creation time (Unix s)")
    obj = _map(_map(event.get("data")).get("object"))
    return EventHead(
        id=event_id,
        type=event_type,
        created=datetime.fromtimestamp(created, UTC),
        object=obj,
        raw=event,
    )


def read_event(head: EventHead, *, default_timezone: str) -> Reading:
    """What the event means for dunning (the table in the module docstring)."""
    obj = head.object
    if head.type == "invoice.payment_failed":
        return _failure(head, default_timezone)
    if head.type in PAID_TYPES:
        invoice_id = _text(obj.get("id"))
        if invoice_id is None:
            return Ignored(why="the event's invoice has no id")
        return InvoicePaid(invoice_id=invoice_id, attempt=recoup_attempt(head.raw, invoice_id))
    if head.type == "customer.updated":
        return _customer_updated(head)
    if head.type in CARD_TYPES:
        customer = _id_of(obj.get("customer"))
        if customer is None:
            return Ignored(why="the payment method is attached to no customer")
        return CardUpdated(customer_id=customer, why="card details updated by the card network")
    return Ignored(why=f"event type {head.type} is not one the intake acts on")


def recoup_attempt(event: Mapping[str, Any], invoice_id: str) -> int | None:
    """Recoup's attempt n behind the event: its request's idempotency key is the charge key
    `charge:{invoice}:{n}` of this invoice."""
    key = _text(_map(event.get("request")).get("idempotency_key"), 255)
    match = _CHARGE_KEY.fullmatch(key or "")
    if match is None or match["invoice"] != invoice_id:
        return None
    return int(match["attempt"])


def _failure(head: EventHead, default_timezone: str) -> Reading:
    inv = head.object
    invoice_id, customer = _text(inv.get("id")), _id_of(inv.get("customer"))
    currency = _text(inv.get("currency"))
    amount = _int(inv.get("amount_remaining"))
    if amount is None:
        amount = _int(inv.get("amount_due"))
    if invoice_id is None or customer is None:
        return Ignored(why="the invoice names no id or no customer")
    if currency is None or len(currency) != 3 or not currency.isascii():
        return Ignored(why=f"the invoice's currency {currency!r} is not an ISO 4217 code")
    if amount is None or amount <= 0:
        return Ignored(why="the invoice has nothing left to pay")
    notes: list[str] = []
    codes = _codes(inv)
    if codes is None:
        notes.append("no expanded payment in the event: no decline code")
        codes = _Codes()
    return InvoiceFailed(
        invoice_id=invoice_id,
        customer_id=customer,
        amount=amount,
        currency=currency.lower(),
        failed_at=head.created,
        timezone=_timezone(inv, default_timezone, notes),
        country=_country(inv, notes),
        decline_code=codes.decline,
        advice_code=codes.advice,
        card_fingerprint=codes.fingerprint,
        card_network=codes.network,
        merchant_id=_text(head.raw.get("account")),
        attempt=recoup_attempt(head.raw, invoice_id),
        notes=tuple(notes),
    )


def _customer_updated(head: EventHead) -> Reading:
    customer, previous = head.object, _map(_map(head.raw.get("data")).get("previous_attributes"))
    customer_id = _text(customer.get("id"))
    if customer_id is None:
        return Ignored(why="the customer has no id")
    method_changed = "default_payment_method" in _map(previous.get("invoice_settings"))
    new_method = _id_of(_map(customer.get("invoice_settings")).get("default_payment_method"))
    if method_changed and new_method is not None:
        return CardUpdated(customer_id=customer_id, why="default payment method changed")
    if "default_source" in previous and _id_of(customer.get("default_source")) is not None:
        return CardUpdated(customer_id=customer_id, why="default source changed")
    return Ignored(why="the customer's default payment method did not change")


def _codes(inv: Mapping[str, Any]) -> _Codes | None:
    """The failed payment's codes and card, from the first expanded payment the invoice
    carries (before basil: `payment_intent`, then `charge`; basil: each `payments` entry)."""
    payments = [_map(p.get("payment")) for p in _list(_map(inv.get("payments")).get("data"))]
    for holder in (inv, *payments):
        intent = holder.get("payment_intent")
        if isinstance(intent, Mapping) and isinstance(intent.get("last_payment_error"), Mapping):
            return _from_intent_error(intent["last_payment_error"])
        charge = holder.get("charge")
        if isinstance(charge, Mapping) and isinstance(charge.get("outcome"), Mapping):
            return _from_charge(charge)
    return None


def _timezone(inv: Mapping[str, Any], default: str, notes: list[str]) -> str:
    subscription = _map(inv.get("subscription_details")) or _map(
        _map(inv.get("parent")).get("subscription_details")
    )
    for where, metadata in (
        ("invoice", inv.get("metadata")),
        ("subscription", subscription.get("metadata")),
    ):
        name = _text(_map(metadata).get("timezone"))
        if name is None:
            continue
        try:
            zone(name)
        except InvalidInput:
            notes.append(f"the {where}'s metadata timezone {name[:64]!r} is no IANA zone")
            continue
        return name
    notes.append(f"customer zone: the tenant's default, {default}")
    return default


def _country(inv: Mapping[str, Any], notes: list[str]) -> str | None:
    code = _text(_map(inv.get("customer_address")).get("country"))
    if code is None:
        return None
    code = code.upper()
    try:
        if len(code) != 2:
            raise InvalidInput("country", code, "expected an ISO 3166-1 alpha-2 code")
        BusinessCalendar(country=code)  # the holidays package knows it
    except InvalidInput:
        notes.append(f"country {code[:8]!r} unknown to the holidays package: none used")
        return None
    return code


__all__ = [
    "CARD_TYPES",
    "PAID_TYPES",
    "SUPPORTED",
    "CardUpdated",
    "EventHead",
    "Ignored",
    "InvoiceFailed",
    "InvoicePaid",
    "Reading",
    "event_head",
    "read_event",
    "recoup_attempt",
]
