"""Reading a Stripe event (its JSON, already verified) into what the dunning runtime does
with it. Pure: no clock, no network; the event's own fields and the tenant's default zone
decide everything (`recoup.recovery.stripe_intake` acts on the result).

| event                                   | becomes                                        |
|-----------------------------------------|------------------------------------------------|
| `invoice.payment_failed`                | `InvoiceFailed`: a failure (or attempt n failed) |
| `invoice.payment_action_required`       | `InvoiceFailed`, decline `authentication_required` |
| `invoice.paid`, `invoice.payment_succeeded` | `InvoicePaid` (or attempt n succeeded)     |
| `invoice.voided`                        | `InvoiceClosed`: `invoice_voided`              |
| `invoice.marked_uncollectible`          | `InvoiceClosed`: `invoice_marked_uncollectible` |
| `customer.subscription.deleted`         | `SubscriptionEnded`: `subscription_deleted`    |
| `customer.subscription.updated` (1)     | `SubscriptionEnded`: `subscription_set_to_cancel` |
| `customer.subscription.updated`, else   | `Ignored`: not set to cancel                   |
| `payment_method.automatically_updated`  | `CardUpdated` for the method's customer        |
| `customer.updated`, default method changed | `CardUpdated` for that customer             |
| anything else                           | `Ignored`, saying why                          |

(1) set to cancel: `cancel_at_period_end` true, or `cancel_at` set, or `status` `canceled` (or
`incomplete_expired`: its first invoice was never paid).

`invoice.payment_action_required` is read as a failure (the same fields as below): the
customer must authenticate (3-D Secure) before the invoice can be paid, which the decline
taxonomy sends to "awaiting the customer". A subscription's event needs its `id` and
`customer` (an id or the expanded customer); an invoice's closing needs its `id`. A
subscription set to cancel is read from its state in the event, not from what changed
(`previous_attributes`): an update of a subscription already set to cancel reads the same, and
stopping twice is harmless.

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
  basil, `parent.subscription_details` after), else the zone of the country of the invoice's
  `customer_address` when that country has exactly one IANA zone (IANA's zone.tab as the
  `tzdata` package ships it; a country of several zones, such as the US, is noted), else the
  tenant's default (`stripe_zones`); a name that is no IANA zone is passed over, noted.
  `timezone_source` says which (`invoice`, `subscription`, `country`, `default`); with the
  tenant's Stripe key the intake reads the customer's own `metadata.timezone` before the
  country (`recoup.recovery.stripe_intake`);
- country: invoice `customer_address.country` when the holidays package knows it, else none
  (the policy's `calendar.default_country` then applies);
- merchant id: the Connect account of the event (`account`), if any;
- subscription: `subscription` before basil, `parent.subscription_details.subscription` after.
- who to write to: `customer_email`, `customer_name`, and the first of the expanded
  customer's `preferred_locales` (`recoup.recovery.stripe_contacts`; one Recoup cannot use
  is left out, noted).

An event caused by Recoup's own attempt n is recognised by the idempotency key of the API
request behind it (`request.idempotency_key`): the charge request gives the endpoint
`charge_idempotency_key` = `charge:{invoice}:{n}`, and an endpoint that passes it to Stripe
makes the webhook of that charge the attempt's outcome rather than a new failure or an
out-of-band payment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from recoup.dunning.invoice import INVOICE_ID_PATTERN, INVOICE_ID_RULE
from recoup.errors import InvalidInput
from recoup.payments.stripe_reading import PaymentCodes as _Codes
from recoup.payments.stripe_reading import as_int as _int
from recoup.payments.stripe_reading import as_list as _list
from recoup.payments.stripe_reading import as_map as _map
from recoup.payments.stripe_reading import codes_of_charge as _from_charge
from recoup.payments.stripe_reading import codes_of_error as _from_intent_error
from recoup.payments.stripe_reading import id_of as _id_of
from recoup.payments.stripe_reading import text as _text
from recoup.recovery.records import FailureReport
from recoup.recovery.stripe_contacts import Contact, contact_of
from recoup.recovery.stripe_zones import ZoneSource, invoice_country, invoice_timezone
from recoup.timekeeping.instants import format_utc

FAILED_TYPE = "invoice.payment_failed"
ACTION_REQUIRED_TYPE = "invoice.payment_action_required"
FAILURE_TYPES = (FAILED_TYPE, ACTION_REQUIRED_TYPE)
PAID_TYPES = ("invoice.paid", "invoice.payment_succeeded")
# An invoice closed without a payment, and the reason its dunning stops with.
CLOSED_REASONS = {
    "invoice.voided": "invoice_voided",
    "invoice.marked_uncollectible": "invoice_marked_uncollectible",
}
CLOSED_TYPES = tuple(CLOSED_REASONS)
SUBSCRIPTION_DELETED = "customer.subscription.deleted"
SUBSCRIPTION_TYPES = (SUBSCRIPTION_DELETED, "customer.subscription.updated")
CARD_TYPES = (
    "payment_method.automatically_updated",
    "payment_method.card_automatically_updated",  # its name before API version 2020-08-27
    "customer.updated",
)
GATEWAY = "stripe"  # the failures' `gateway`, which the recovery report groups by
SUPPORTED = (*FAILURE_TYPES, *PAID_TYPES, *CLOSED_TYPES, *SUBSCRIPTION_TYPES, *CARD_TYPES)
AUTHENTICATION_REQUIRED = "authentication_required"  # the taxonomy's "customer action" code
ENDED_STATUSES = ("canceled", "incomplete_expired")
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
    subscription_id: str | None = None
    timezone_source: ZoneSource = "default"  # where `timezone` came from
    contact: Contact = field(default_factory=Contact)  # who to write to (`stripe_contacts`)
    # Stripe's page where the customer pays the invoice or updates the card (https only): the
    # customers' emails link to it.
    hosted_invoice_url: str | None = None

    def to_report(self) -> FailureReport:
        """The one conversion of a Stripe failure on its way in, as `wire.dunning.FailureIn`'s
        is of the API's: the failure with who to write to, checked as it is made (an event
        that reads but cannot be dunned raises `InvalidInput` here, when it is acted on)."""
        return FailureReport(
            invoice_id=self.invoice_id,
            customer_id=self.customer_id,
            amount=self.amount,
            currency=self.currency,
            failed_at=self.failed_at,
            timezone=self.timezone,
            country=self.country,
            decline_code=self.decline_code,
            advice_code=self.advice_code,
            card_fingerprint=self.card_fingerprint,
            card_network=self.card_network,
            gateway=GATEWAY,
            merchant_id=self.merchant_id,
            customer_email=self.contact.email,
            customer_name=self.contact.name,
            locale=self.contact.locale,
        )


@dataclass(frozen=True, kw_only=True)
class InvoicePaid:
    invoice_id: str
    attempt: int | None  # Recoup's attempt behind the event, if any


@dataclass(frozen=True, kw_only=True)
class InvoiceClosed:
    """The invoice was closed without a payment (voided, written off): dunning stops."""

    invoice_id: str
    reason: str  # `invoice_voided`, `invoice_marked_uncollectible`


@dataclass(frozen=True, kw_only=True)
class SubscriptionEnded:
    """The subscription was cancelled or set to cancel: its invoices are dunned no more."""

    subscription_id: str
    customer_id: str
    reason: str  # `subscription_deleted`, `subscription_set_to_cancel`
    why: str


@dataclass(frozen=True, kw_only=True)
class CardUpdated:
    customer_id: str
    why: str
    exp_month: int | None = None  # the new card's expiry, when the event carries the card
    exp_year: int | None = None


@dataclass(frozen=True, kw_only=True)
class Ignored:
    why: str


Reading = InvoiceFailed | InvoicePaid | InvoiceClosed | SubscriptionEnded | CardUpdated | Ignored


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
    if head.type == FAILED_TYPE:
        return _failure(head, default_timezone)
    if head.type == ACTION_REQUIRED_TYPE:
        return _failure(head, default_timezone, decline=AUTHENTICATION_REQUIRED)
    if head.type in CLOSED_REASONS:
        invoice_id = _text(obj.get("id"))
        if invoice_id is None:
            return Ignored(why="the event's invoice has no id")
        return InvoiceClosed(invoice_id=invoice_id, reason=CLOSED_REASONS[head.type])
    if head.type in SUBSCRIPTION_TYPES:
        return _subscription_event(head)
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
        card = _map(obj.get("card"))
        return CardUpdated(
            customer_id=customer,
            why="card details updated by the card network",
            exp_month=_int(card.get("exp_month")),
            exp_year=_int(card.get("exp_year")),
        )
    return Ignored(why=f"event type {head.type} is not one the intake acts on")


def recoup_attempt(event: Mapping[str, Any], invoice_id: str) -> int | None:
    """Recoup's attempt n behind the event: its request's idempotency key is the charge key
    `charge:{invoice}:{n}` of this invoice."""
    key = _text(_map(event.get("request")).get("idempotency_key"), 255)
    match = _CHARGE_KEY.fullmatch(key or "")
    if match is None or match["invoice"] != invoice_id:
        return None
    return int(match["attempt"])


_INVOICE_ID = re.compile(INVOICE_ID_PATTERN)


def _failure(head: EventHead, default_timezone: str, *, decline: str | None = None) -> Reading:
    """A failure; `decline`: the decline code the event's type gives whatever its payment
    says (`invoice.payment_action_required`)."""
    inv = head.object
    invoice_id, customer = _text(inv.get("id")), _id_of(inv.get("customer"))
    currency = _text(inv.get("currency"))
    amount = _int(inv.get("amount_remaining"))
    if amount is None:
        amount = _int(inv.get("amount_due"))
    if invoice_id is None or customer is None:
        return Ignored(why="the invoice names no id or no customer")
    if not _INVOICE_ID.fullmatch(invoice_id):
        return Ignored(why=f"the invoice's id is not one Recoup accepts: {INVOICE_ID_RULE}")
    if currency is None or len(currency) != 3 or not currency.isascii():
        return Ignored(why=f"the invoice's currency {currency!r} is not an ISO 4217 code")
    if amount is None or amount <= 0:
        return Ignored(why="the invoice has nothing left to pay")
    notes: list[str] = []
    codes = _codes(inv)
    if decline is not None:
        notes.append(f"the customer must authenticate: decline code {decline}")
        codes = replace(codes or _Codes(), decline=decline)
    elif codes is None:
        notes.append("no expanded payment in the event: no decline code")
        codes = _Codes()
    timezone, source = invoice_timezone(inv, default_timezone, notes)
    contact = contact_of(inv, notes)
    return InvoiceFailed(
        invoice_id=invoice_id,
        customer_id=customer,
        amount=amount,
        currency=currency.lower(),
        failed_at=head.created,
        timezone=timezone,
        country=invoice_country(inv, notes),
        decline_code=codes.decline,
        advice_code=codes.advice,
        card_fingerprint=codes.fingerprint,
        card_network=codes.network,
        merchant_id=_text(head.raw.get("account")),
        attempt=recoup_attempt(head.raw, invoice_id),
        notes=tuple(notes),
        subscription_id=subscription_of(inv),
        timezone_source=source,
        hosted_invoice_url=_page(inv.get("hosted_invoice_url")),
        contact=contact,
    )


def _page(value: Any) -> str | None:
    """An https page of Stripe's, or None."""
    if not isinstance(value, str) or not value.startswith("https://") or len(value) > 2048:
        return None
    return value


def subscription_of(inv: Mapping[str, Any]) -> str | None:
    """The invoice's subscription: `subscription` before basil (an id or the expanded
    object), `parent.subscription_details.subscription` after."""
    found = _id_of(inv.get("subscription"))
    if found is None:
        details = _map(_map(inv.get("parent")).get("subscription_details"))
        found = _id_of(details.get("subscription"))
    return found


def _subscription_event(head: EventHead) -> Reading:
    sub = head.object
    subscription_id, customer = _text(sub.get("id")), _id_of(sub.get("customer"))
    if subscription_id is None or customer is None:
        return Ignored(why="the subscription names no id or no customer")
    if head.type == SUBSCRIPTION_DELETED:
        return SubscriptionEnded(
            subscription_id=subscription_id,
            customer_id=customer,
            reason="subscription_deleted",
            why=f"subscription {subscription_id} cancelled",
        )
    status, cancel_at = _text(sub.get("status")), _int(sub.get("cancel_at"))
    if status in ENDED_STATUSES:
        why = f"subscription {subscription_id} is {status}"
    elif sub.get("cancel_at_period_end") is True:
        why = f"subscription {subscription_id} is set to cancel at the end of its period"
    elif cancel_at is not None and 0 <= cancel_at < MAX_UNIX:
        at = format_utc(datetime.fromtimestamp(cancel_at, UTC))
        why = f"subscription {subscription_id} is set to cancel at {at}"
    else:
        return Ignored(why=f"the update does not set subscription {subscription_id} to cancel")
    return SubscriptionEnded(
        subscription_id=subscription_id,
        customer_id=customer,
        reason="subscription_set_to_cancel",
        why=why,
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


__all__ = [
    "ACTION_REQUIRED_TYPE",
    "AUTHENTICATION_REQUIRED",
    "CARD_TYPES",
    "CLOSED_TYPES",
    "FAILURE_TYPES",
    "GATEWAY",
    "PAID_TYPES",
    "SUBSCRIPTION_DELETED",
    "SUBSCRIPTION_TYPES",
    "SUPPORTED",
    "CardUpdated",
    "EventHead",
    "Ignored",
    "InvoiceClosed",
    "InvoiceFailed",
    "InvoicePaid",
    "Reading",
    "SubscriptionEnded",
    "event_head",
    "read_event",
    "recoup_attempt",
    "subscription_of",
]
