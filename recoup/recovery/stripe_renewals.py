"""Reading Stripe's `invoice.upcoming` into an upcoming renewal (pure: the event's own fields
and the tenant's default zone decide; `recoup.recovery.stripe_intake` acts on it).

Stripe sends `invoice.upcoming` a configurable number of days before a subscription renews,
with the invoice it will create (no `id` yet). Read from it:
- customer: `customer` (an id, or the expanded customer's `id`);
- renewal instant: `next_payment_attempt`, else `period_end`, else the subscription's
  `current_period_end` when it is expanded (none: ignored);
- amount and currency: `amount_due` (0 is a renewal too: a reminder still matters when the
  card runs out before a paid period begins) and `currency`;
- zone: as a failure's (`stripe_zones.invoice_timezone`);
- who to write to: as a failure's (`stripe_contacts`);
- the card: the first expanded payment method with a `card` among the invoice's
  `default_payment_method`, the expanded subscription's `default_payment_method` and the
  expanded customer's `invoice_settings.default_payment_method` (its `exp_month` and
  `exp_year`). Stripe sends them as ids in a webhook: then the card is not known, noted, and no
  reminder is planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from recoup.payments.stripe_reading import as_int, as_map, id_of, text
from recoup.recovery.renewals import RenewalReport
from recoup.recovery.stripe_contacts import Contact, contact_of
from recoup.recovery.stripe_events import MAX_UNIX, EventHead, Ignored
from recoup.recovery.stripe_zones import invoice_timezone

UPCOMING_TYPE = "invoice.upcoming"


@dataclass(frozen=True, kw_only=True)
class RenewalUpcoming:
    customer_id: str
    renews_at: datetime
    amount: int
    currency: str
    timezone: str
    exp_month: int | None
    exp_year: int | None
    contact: Contact
    notes: tuple[str, ...] = ()

    def to_report(self) -> RenewalReport:
        """The one conversion of an announced renewal on its way in, as `wire.customers`' is
        of the API's: checked as it is made (`InvalidInput` naming the field)."""
        return RenewalReport(
            customer_id=self.customer_id,
            renews_at=self.renews_at,
            amount=self.amount,
            currency=self.currency,
            timezone=self.timezone,
            exp_month=self.exp_month,
            exp_year=self.exp_year,
            customer_email=self.contact.email,
            customer_name=self.contact.name,
            locale=self.contact.locale,
        )


def read_upcoming(head: EventHead, *, default_timezone: str) -> RenewalUpcoming | Ignored:
    """The renewal an `invoice.upcoming` announces (the module docstring)."""
    inv = head.object
    customer = id_of(inv.get("customer"))
    currency = text(inv.get("currency"))
    amount = as_int(inv.get("amount_due"))
    subscription = as_map(inv.get("subscription"))
    renews = next(
        (
            at
            for at in (
                as_int(inv.get("next_payment_attempt")),
                as_int(inv.get("period_end")),
                as_int(subscription.get("current_period_end")),
            )
            if at is not None and 0 < at < MAX_UNIX
        ),
        None,
    )
    if customer is None:
        return Ignored(why="the upcoming invoice names no customer")
    if renews is None:
        return Ignored(why="the upcoming invoice says not when it renews")
    if currency is None or len(currency) != 3 or not currency.isascii() or not currency.isalpha():
        return Ignored(why=f"the upcoming invoice's currency {currency!r} is not an ISO 4217 code")
    if amount is None or amount < 0:
        return Ignored(why="the upcoming invoice has no amount due")
    notes: list[str] = []
    timezone, _ = invoice_timezone(inv, default_timezone, notes)
    exp = _card_expiry(inv, subscription)
    if exp is None:
        notes.append("no expanded card in the event: its expiry is not known, no reminder")
    return RenewalUpcoming(
        customer_id=customer,
        renews_at=datetime.fromtimestamp(renews, UTC),
        amount=amount,
        currency=currency.lower(),
        timezone=timezone,
        exp_month=exp[0] if exp else None,
        exp_year=exp[1] if exp else None,
        contact=contact_of(inv, notes),
        notes=tuple(notes),
    )


def _card_expiry(inv: Mapping[str, Any], subscription: Mapping[str, Any]) -> tuple[int, int] | None:
    customer = as_map(inv.get("customer"))
    for method in (
        inv.get("default_payment_method"),
        subscription.get("default_payment_method"),
        as_map(customer.get("invoice_settings")).get("default_payment_method"),
    ):
        card = as_map(as_map(method).get("card"))
        month, year = as_int(card.get("exp_month")), as_int(card.get("exp_year"))
        if month is not None and year is not None and 1 <= month <= 12 and 2000 <= year <= 2200:
            return month, year
    return None


__all__ = ["UPCOMING_TYPE", "RenewalUpcoming", "read_upcoming"]
