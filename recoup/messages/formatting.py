"""Money, dates and locales as a customer reads them: babel's formatting in the customer's
CLDR locale and time zone, for the words of an email (`rendering.py` gives these to its
templates) and for a tenant's own use.

babel (the `email` extra) is imported where it is used: importing this module needs none.
"""

from __future__ import annotations

import functools
from datetime import date, datetime, tzinfo
from decimal import Decimal
from typing import TYPE_CHECKING

from recoup.errors import InvalidInput

if TYPE_CHECKING:
    from babel import Locale

DEFAULT_LOCALE = "en"


# The formatting functions are pure and babel's are slow Python (a pattern parsed, a number
# rounded through Decimal): cached, as emails repeat the same few prices, dates and locales.
CACHED = 4096  # entries of each cache


@functools.lru_cache(maxsize=CACHED)
def format_money(minor: int, currency: str, locale: str | Locale) -> str:
    """`minor` units of `currency` as the locale writes money: 1999 usd → "$19.99" (en),
    "19,99 $US" (fr); 1999 jpy → "¥1,999" (JPY has no minor unit)."""
    from babel.numbers import format_currency, get_currency_precision

    code = currency.upper()
    value = Decimal(minor).scaleb(-get_currency_precision(code))
    loc = locale if not isinstance(locale, str) else locale_or_default(locale)
    return format_currency(value, code, locale=loc)


def parse_locale(value: str, *, field: str) -> Locale:
    from babel import Locale, UnknownLocaleError

    try:
        return Locale.parse(value.replace("-", "_"))
    except (UnknownLocaleError, ValueError, TypeError, AttributeError):
        raise InvalidInput(
            field, value, 'expected a locale babel knows, such as "en", "fr_FR" or "pt-BR"'
        ) from None


@functools.lru_cache(maxsize=CACHED)
def locale_or_default(value: str) -> Locale:
    """The customer's locale, or English: an unknown locale from a customer's record must not
    stop the email that tells them their payment failed."""
    try:
        return parse_locale(value, field="locale")
    except InvalidInput:
        return parse_locale(DEFAULT_LOCALE, field="locale")


def check_locale(value: str, *, field: str = "locale") -> str:
    """`value` if babel knows it as a locale ("en", "fr_FR", "pt-BR"); else `InvalidInput`."""
    parse_locale(value, field=field)
    return value


def format_local_date(instant: datetime, tz: tzinfo, locale: Locale) -> str:
    """The local date of `instant` in `tz`, written in full ("Tuesday, June 23, 2026" in en)."""
    return _full_date(instant.astimezone(tz).date(), locale)


@functools.lru_cache(maxsize=CACHED)
def _full_date(day: date, locale: Locale) -> str:
    from babel.dates import format_date

    return format_date(day, format="full", locale=locale)


def format_local_datetime(instant: datetime, tz: tzinfo, locale: Locale) -> str:
    """`instant` in `tz` in babel's long form (its date, time and zone)."""
    from babel.dates import format_datetime as babel_datetime

    return babel_datetime(instant, format="long", tzinfo=tz, locale=locale)


__all__ = [
    "DEFAULT_LOCALE",
    "check_locale",
    "format_local_date",
    "format_local_datetime",
    "format_money",
    "locale_or_default",
    "parse_locale",
]
