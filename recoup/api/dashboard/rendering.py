"""The dashboard's templates (package data) and the filters they format values with.

Autoescaping is on for every template: names, errors and event data are the tenant's input
and reach the page as text. Only the charts, SVG that matplotlib drew, are inserted as markup.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import jinja2
from fastapi.templating import Jinja2Templates

EXCERPT = 200  # characters of an error shown in a table

# ISO 4217 minor-unit exponents that are not 2 (amounts are stored in minor units).
_EXPONENTS = {
    **dict.fromkeys(
        "bif clp djf gnf isk jpy kmf krw pyg rwf ugx uyi vnd vuv xaf xof xpf".split(), 0
    ),
    **dict.fromkeys("bhd iqd jod kwd lyd omr tnd".split(), 3),
}


def when(instant: datetime | None) -> str:
    """An instant in UTC, to the second."""
    if instant is None:
        return "—"
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def local(instant: datetime | None, zone: str) -> str:
    """An instant on the wall clock of `zone` (a customer's), with the zone's abbreviation."""
    if instant is None:
        return "—"
    return instant.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")


def duration(ms: float) -> str:
    if ms < 10:
        return f"{ms:.2f} ms"  # a Python handler's attempt takes microseconds
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def excerpt(text: str | None, limit: int = EXCERPT) -> str:
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def money(amount: int, currency: str) -> str:
    """Minor units as the currency writes them: 1999 usd → 19.99 USD, 500 jpy → 500 JPY."""
    exponent = _EXPONENTS.get(currency.lower(), 2)
    value = f"{Decimal(amount).scaleb(-exponent):.{exponent}f}"  # exact: no float rounding
    return f"{value} {currency.upper()}"


def templates() -> Jinja2Templates:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("recoup.api.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt name fails the test, not the page
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        when=when, local=local, duration=duration, excerpt=excerpt, money=money
    )
    return Jinja2Templates(env=environment)


__all__ = ["duration", "excerpt", "local", "money", "templates", "when"]
