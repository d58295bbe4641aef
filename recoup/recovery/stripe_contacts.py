"""Who a Stripe invoice's customer is, for the emails Recoup sends them (pure): the address
and name the invoice carries (`customer_email`, `customer_name`: Stripe copies them from the
customer when the invoice is finalised) and the language from the customer's
`preferred_locales` when the event carries the customer expanded. Each value is checked as
`recovery.contacts` checks it; one that fails is left out and noted, never a refused event."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recoup.errors import InvalidInput
from recoup.payments.stripe_reading import as_map, text
from recoup.recovery.contacts import display_name, email_address, locale_tag


@dataclass(frozen=True, kw_only=True)
class Contact:
    email: str | None = None
    name: str | None = None
    locale: str | None = None


def contact_of(inv: Mapping[str, Any], notes: list[str]) -> Contact:
    """The invoice's customer's address, name and locale (each None when absent or invalid,
    noted)."""
    customer = as_map(inv.get("customer"))  # empty unless expanded
    locales = customer.get("preferred_locales")
    first = locales[0] if isinstance(locales, list) and locales else None
    return Contact(
        email=_checked(email_address, text(inv.get("customer_email"), 254), "address", notes),
        name=_checked(display_name, text(inv.get("customer_name"), 200), "name", notes),
        locale=_checked(locale_tag, text(first, 35), "locale", notes),
    )


def _checked(check: Any, value: str | None, what: str, notes: list[str]) -> str | None:
    if value is None:
        return None
    try:
        checked: str = check(value)
    except InvalidInput:
        notes.append(f"the customer's {what} {value[:40]!r} is not one Recoup can use: left out")
        return None
    return checked


__all__ = ["Contact", "contact_of"]
