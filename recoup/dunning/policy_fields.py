"""Reading one value of a policy document (TOML, already parsed): its type and range checked,
or a `ConfigError` whose field is the value's dotted path (`limits.max_duration_days`,
`blackouts[0].start`). Pure: no clock, no files."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from recoup.errors import ConfigError, InvalidInput
from recoup.timekeeping.instants import parse_instant, require_in_range


def table(data: dict[str, Any], key: str, allowed: frozenset[str]) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(key, value, "expected a table")
    no_extra(value, allowed, prefix=f"{key}.")
    return value


def no_extra(value: dict[str, Any], allowed: frozenset[str], *, prefix: str = "") -> None:
    for key in value:
        if key not in allowed:
            # A quoted TOML key may hold anything, a line break too: name it printably.
            shown = key if key.isprintable() else ascii(key)
            raise ConfigError(f"{prefix}{shown}", value[key], f"expected one of {sorted(allowed)}")


def integer(path: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(path, value, f"expected an integer from {low} to {high}")
    return value


def number(path: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError(path, value, f"expected a number from {low} to {high}")
    return float(value)


def boolean(path: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(path, value, "expected true or false")
    return value


def text(path: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(path, value, "expected a non-empty string")
    return value.strip()


def instant(path: str, value: Any) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ConfigError(path, value.isoformat(), "expected an instant with an offset")
        try:  # in the years instants may take, and no overflow near year 1 or 9999
            return require_in_range(path, value)
        except InvalidInput as exc:
            raise ConfigError(path, value.isoformat(), exc.allowed) from None
    if isinstance(value, str):
        try:
            return parse_instant(path, value)
        except InvalidInput as exc:
            raise ConfigError(path, value, exc.allowed) from None
    raise ConfigError(path, value, "expected an instant such as 2026-07-01T02:00:00Z")


def country(path: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) != 2 or not value.isalpha():
        raise ConfigError(path, value, 'expected an ISO 3166-1 alpha-2 country code such as "US"')
    from recoup.timekeeping.calendar import BusinessCalendar

    try:
        BusinessCalendar(country=value.upper())
    except InvalidInput:
        raise ConfigError(path, value, "expected a country the holidays package knows") from None
    return value.upper()


__all__ = ["boolean", "country", "instant", "integer", "no_extra", "number", "table", "text"]
