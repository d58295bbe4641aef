"""Where a Stripe invoice's customer is: their zone (the invoice's or subscription's metadata,
else their country's only zone, else the tenant's default) and their country, each with the
notes that say how it was found. The rules are the failure's field mapping in
`recovery.stripe_events`' docstring; the intake completes them from Stripe's facts
(`recovery.stripe_facts`), and an upcoming renewal reads its zone the same way
(`recovery.stripe_renewals`). Pure: no clock, no network.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from recoup.errors import InvalidInput
from recoup.payments.stripe_reading import as_map, metadata_timezone, text
from recoup.timekeeping.calendar import BusinessCalendar
from recoup.timekeeping.zones import country_zones

ZoneSource = Literal["invoice", "subscription", "customer", "country", "default"]


def invoice_timezone(
    inv: Mapping[str, Any], default: str, notes: list[str]
) -> tuple[str, ZoneSource]:
    """The customer's zone for the invoice, and where it came from (`stripe_events`' docstring)."""
    subscription = as_map(inv.get("subscription_details")) or as_map(
        as_map(inv.get("parent")).get("subscription_details")
    )
    found_in = metadata_timezone((("invoice", inv), ("subscription", subscription)), notes)
    if found_in is not None:
        name, where = found_in
        return name, "invoice" if where == "invoice" else "subscription"
    country = text(as_map(inv.get("customer_address")).get("country"), 2)
    found = zone_of_country(country, notes)
    if found is not None:
        return found, "country"
    notes.append(f"customer zone: the tenant's default, {default}")
    return default, "default"


def zone_of_country(country: str | None, notes: list[str]) -> str | None:
    """The zone of a country that has exactly one (else None, noted)."""
    if country is None:
        return None
    zones = country_zones(country)
    if len(zones) == 1:
        notes.append(f"customer zone: {zones[0]}, the only zone of their country {country.upper()}")
        return zones[0]
    if zones:
        notes.append(f"their country {country.upper()} has {len(zones)} zones: none chosen")
    return None


def invoice_country(inv: Mapping[str, Any], notes: list[str]) -> str | None:
    """The country of the invoice's `customer_address`, when the holidays package knows it."""
    return holiday_country(text(as_map(inv.get("customer_address")).get("country")), notes)


def holiday_country(code: str | None, notes: list[str]) -> str | None:
    """`code` (ISO 3166-1 alpha-2, any case) upper-cased when the holidays package knows the
    country, else None (noted)."""
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
    "ZoneSource",
    "holiday_country",
    "invoice_country",
    "invoice_timezone",
    "zone_of_country",
]
