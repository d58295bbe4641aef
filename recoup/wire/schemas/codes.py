"""Codes the API takes from fixed lists, stated as such in the document: IANA time zones and
the countries whose public holidays are known, as enums (named components), and currencies as
a pattern. The lists are read from the running server's own data (its time zone database and
its `holidays` package), so the document names exactly what that server accepts."""

from __future__ import annotations

import enum
import zoneinfo
from collections.abc import Iterable
from typing import Annotated

import holidays
from pydantic import AfterValidator

from recoup.wire.schemas.common import Text
from recoup.wire.schemas.stated import Stated, StatedAs

CURRENCY = "^[A-Za-z]{3}$"  # ISO 4217 alphabetic codes, either case (FailureReport checks it)

# Every zone of the database but `localtime` (the machine's own zone, not an IANA name: it
# would make the same request mean different things on different servers) and `posixrules`.
TIME_ZONES: tuple[str, ...] = tuple(
    sorted(zoneinfo.available_timezones() - {"localtime", "posixrules"})
)
_TIME_ZONES = frozenset(TIME_ZONES)
# ISO 3166-1 alpha-2 codes of the countries `holidays` knows, either case (upper-cased on use).
COUNTRIES: tuple[str, ...] = tuple(
    sorted(code for code in holidays.list_supported_countries() if len(code) == 2)
)
_COUNTRIES = frozenset(COUNTRIES) | {code.lower() for code in COUNTRIES}


def _time_zone(name: str) -> str:
    if name not in _TIME_ZONES:
        raise ValueError("expected an IANA time zone name such as 'Europe/Paris'")
    return name


def _country(code: str) -> str:
    if code not in _COUNTRIES:
        raise ValueError(
            "expected an ISO 3166-1 alpha-2 code of a country whose holidays are known, such as US"
        )
    return code


def _listed(name: str, values: Iterable[str]) -> type[enum.Enum]:
    """An enum of `values`, only to state them as one named component of the document (the
    fields stay plain strings)."""
    return enum.Enum(name, {value: value for value in values}, type=str)  # type: ignore[return-value]


# On `Text`: a NUL or a lone surrogate is refused as in any other field, by its own message.
TimeZone = Annotated[Text, AfterValidator(_time_zone), StatedAs(_listed("TimeZone", TIME_ZONES))]
Country = Annotated[
    Text,
    AfterValidator(_country),
    StatedAs(_listed("Country", [*COUNTRIES, *(code.lower() for code in COUNTRIES)])),
]
Currency = Annotated[Text, Stated(pattern=CURRENCY)]

__all__ = ["COUNTRIES", "CURRENCY", "TIME_ZONES", "Country", "Currency", "TimeZone"]
