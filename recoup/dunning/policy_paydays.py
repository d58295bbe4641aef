"""Paydays in a policy: which local dates an insufficient-funds retry aims at.

A policy may say

    paydays = [1, 15, "last_business_day"]   # days of the month and/or the last business day
    paydays = "country"                      # the customer's country's convention (data)

The conventions by country are package data (`data/paydays.toml`, with their sources). The
rules of a date, shared by the planner and the simulated world:

- a day of the month past the month's end is its last day (the 31st in April is the 30th);
- `last_business_day` is the month's last business day in the customer's calendar;
- a payday on a closed day (weekend, holiday) is paid on the business day before it, as
  payroll is.

Only insufficient-funds declines (`insufficient_funds`, ISO 8583 `51` in the decline taxonomy)
follow paydays: money that arrives on payday cures nothing else. Pure: no clock, no files but
the package's own data.
"""

from __future__ import annotations

import calendar as month_calendar
import functools
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from importlib import resources
from typing import Any

from recoup.dunning.taxonomy import default_taxonomy
from recoup.errors import ConfigError
from recoup.timekeeping.calendar import BusinessCalendar

LAST_BUSINESS_DAY = "last_business_day"
BY_COUNTRY = "country"
FUNDS_ISO_CODE = "51"  # ISO 8583 "insufficient funds / over credit limit"
_MAX_RULES = 31

PaydayRule = int | str  # a day of the month 1–31, or LAST_BUSINESS_DAY


@dataclass(frozen=True, kw_only=True)
class Paydays:
    """A policy's paydays: fixed `rules`, or the customer's country's (`by_country`)."""

    rules: tuple[PaydayRule, ...] = ()
    by_country: bool = False

    def rules_for(self, country: str | None) -> tuple[PaydayRule, ...]:
        """The rules that apply to a customer in `country` (none: no payday to aim at)."""
        return country_paydays(country) if self.by_country else self.rules


def _rules(path: str, value: Any) -> tuple[PaydayRule, ...]:
    allowed = f'expected days of the month 1–31 and/or "{LAST_BUSINESS_DAY}"'
    if not isinstance(value, list) or not value or len(value) > _MAX_RULES:
        raise ConfigError(path, value, f"{allowed}, or {BY_COUNTRY!r}")
    rules: list[PaydayRule] = []
    for i, rule in enumerate(value):
        if rule == LAST_BUSINESS_DAY:
            rules.append(LAST_BUSINESS_DAY)
        elif isinstance(rule, int) and not isinstance(rule, bool) and 1 <= rule <= 31:
            rules.append(rule)
        else:
            raise ConfigError(f"{path}[{i}]", rule, allowed)
    return tuple(dict.fromkeys(rules))  # in the order given, without repeats


def parse_paydays(value: Any) -> Paydays | None:
    """The policy's `paydays` value (None when absent); `ConfigError` naming `paydays`."""
    if value is None:
        return None
    if value == BY_COUNTRY:
        return Paydays(by_country=True)
    return Paydays(rules=_rules("paydays", value))


@functools.cache
def country_conventions() -> dict[str, tuple[PaydayRule, ...]]:
    """The shipped conventions: ISO country → payday rules (read once from package data)."""
    text = resources.files("recoup.dunning").joinpath("data/paydays.toml").read_text("utf-8")
    countries = tomllib.loads(text)["countries"]
    return {code: _rules(f"countries.{code}", rules) for code, rules in countries.items()}


def country_paydays(country: str | None) -> tuple[PaydayRule, ...]:
    """The payday rules of `country` (none for a country without a convention)."""
    return country_conventions().get((country or "").strip().upper(), ())


def _last_business_day(year: int, month: int, calendar: BusinessCalendar) -> date:
    day = date(year, month, month_calendar.monthrange(year, month)[1])
    for _ in range(31):
        if calendar.is_business_day(day):
            return day
        day -= timedelta(days=1)
    return day  # a month closed throughout: its first day, which nobody configures


def _paid_on(day: date, calendar: BusinessCalendar) -> date:
    """A payday on a closed day is paid on the business day before it."""
    for _ in range(31):
        if calendar.is_business_day(day):
            return day
        day -= timedelta(days=1)
    return day


@functools.lru_cache(maxsize=4096)
def paydays_of_month(
    rules: tuple[PaydayRule, ...], year: int, month: int, calendar: BusinessCalendar
) -> frozenset[date]:
    """The local dates of the month that are paydays under `rules` (rules in the docstring)."""
    last = month_calendar.monthrange(year, month)[1]
    found: set[date] = set()
    for rule in rules:
        if rule == LAST_BUSINESS_DAY:
            found.add(_last_business_day(year, month, calendar))
        elif isinstance(rule, int):
            found.add(_paid_on(date(year, month, min(rule, last)), calendar))
    return frozenset(found)


def is_payday(day: date, rules: tuple[PaydayRule, ...], calendar: BusinessCalendar) -> bool:
    # A payday paid early may fall in the month before (the 1st on a Sunday is paid on the
    # last Friday of the previous month), so the next month's paydays are asked too.
    if not rules:
        return False
    after = day.replace(day=1) + timedelta(days=32)
    return day in paydays_of_month(rules, day.year, day.month, calendar) or day in (
        paydays_of_month(rules, after.year, after.month, calendar)
    )


def paydays_from(
    start: date, last: date, rules: tuple[PaydayRule, ...], calendar: BusinessCalendar
) -> Iterator[date]:
    """The paydays in [start, last], earliest first."""
    if not rules:
        return
    day = start
    while day <= last:
        if is_payday(day, rules, calendar):
            yield day
        day += timedelta(days=1)


def is_insufficient_funds(decline_code: str | None) -> bool:
    """Whether the decline is an insufficient-funds one (the only kind paydays cure)."""
    code = (decline_code or "").strip().lower()
    if code == FUNDS_ISO_CODE:
        return True
    entry = default_taxonomy().lookup("stripe_decline", code)
    return entry is not None and entry.iso == FUNDS_ISO_CODE


__all__ = [
    "BY_COUNTRY",
    "LAST_BUSINESS_DAY",
    "PaydayRule",
    "Paydays",
    "country_conventions",
    "country_paydays",
    "is_insufficient_funds",
    "is_payday",
    "parse_paydays",
    "paydays_from",
    "paydays_of_month",
]
