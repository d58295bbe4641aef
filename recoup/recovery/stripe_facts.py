"""Facts from Stripe: a failure whose event lacks a part completed from the invoice as Stripe
shows it (`StripeBilling.failure_facts`), pure, for the intake (`recovery.stripe_intake`).

A plain `invoice.payment_failed` carries its payment as an id only, so no
decline code and no card. When the tenant has a Stripe key and the event lacks the decline
code, the card, or a zone of its own (from the invoice's or subscription's metadata), the
failure is completed from `failure_facts`, each part only where the event had none:
- decline and advice codes, the card's fingerprint and network, from the payment intent's
  error or the charge (Stripe's generic `card_declined` says nothing: still no code);
- zone, first found: the invoice's `metadata.timezone`, the subscription's (the event's
  snapshot, then the subscription itself), the customer's `metadata.timezone`, the zone of
  the customer's country when it has exactly one IANA zone (`tzdata`'s zone.tab; a country of
  several zones is noted), then the tenant's `default_timezone`;
- country: the invoice's `customer_address.country`, else the customer's address.
The answer's `detail` says where each part came from.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from recoup.recovery.stripe_events import InvoiceFailed
from recoup.recovery.stripe_zones import holiday_country, zone_of_country

if TYPE_CHECKING:
    from recoup.payments.stripe_billing import FailureFacts

GENERIC_DECLINE = "card_declined"  # Stripe's code of a decline without a reason
# An invoice Stripe shows in one of these states by the time its facts are read opens nothing.
CLOSED_AT_STRIPE = ("paid", "void", "uncollectible")


def wants_facts(failed: InvoiceFailed) -> bool:
    """Whether the event lacks a part that Stripe's facts may give."""
    return (
        failed.decline_code is None
        or failed.card_fingerprint is None
        or failed.timezone_source in ("country", "default")
        or failed.country is None
    )


def completed(failed: InvoiceFailed, facts: FailureFacts) -> InvoiceFailed:
    """`failed` with what it lacks taken from `facts`, each part noted."""
    notes = list(failed.notes)
    changes: dict[str, Any] = {}
    if failed.decline_code is None:
        decline = None if facts.decline_code == GENERIC_DECLINE else facts.decline_code
        notes = [n for n in notes if not n.startswith("no expanded payment")]
        if decline is not None:
            changes["decline_code"] = decline
            notes.append(f"decline code {decline} read from the payment at Stripe")
        else:
            notes.append("no decline code at Stripe either")
        if failed.advice_code is None and facts.advice_code is not None:
            changes["advice_code"] = facts.advice_code
    if failed.card_fingerprint is None and facts.card_fingerprint is not None:
        changes["card_fingerprint"] = facts.card_fingerprint
        notes.append("card read at Stripe")
    if failed.card_network is None and facts.card_network is not None:
        changes["card_network"] = facts.card_network
    if failed.timezone_source in ("country", "default"):
        found = facts.timezone if facts.timezone_source is not None else None
        if found is not None and facts.timezone_source in ("subscription", "customer"):
            notes = [n for n in notes if not n.startswith(("customer zone:", "their country"))]
            changes["timezone"], changes["timezone_source"] = found, facts.timezone_source
            notes.append(
                f"customer zone: {found}, the {facts.timezone_source}'s metadata at Stripe"
            )
        elif failed.timezone_source == "default" and facts.customer_country is not None:
            said: list[str] = []
            by_country = zone_of_country(facts.customer_country, said)
            if by_country is not None:
                notes = [n for n in notes if not n.startswith(("customer zone:", "their country"))]
                changes["timezone"], changes["timezone_source"] = by_country, "country"
            notes += [f"{n} (the customer's address at Stripe)" for n in said]
    if failed.country is None and facts.customer_country is not None:
        country = holiday_country(facts.customer_country, notes)
        if country is not None:
            changes["country"] = country
            notes.append(f"country {country} from the customer's address at Stripe")
    return replace(failed, notes=tuple(notes), **changes)


__all__ = ["CLOSED_AT_STRIPE", "GENERIC_DECLINE", "completed", "wants_facts"]
