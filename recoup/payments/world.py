"""A simulated world with time in it: the chance that one retry of a soft decline succeeds, by
the customer's local hour, weekday and day of the month, per segment.

    world = packaged_world("calibrated")
    p = success_probability(world, Segment(decline_code="insufficient_funds", network="visa",
                            country="US"), local_datetime, TryHistory(first_failed_at=failed_at))

The model is logistic: the log-odds of success are the segment's base (its chance at the best
hour, on a neutral day) plus the logarithm of each odds multiplier that applies:

- **hour**: `hours.decline_rates` gives a decline rate per local hour (0–23); the hour's
  multiplier is its success odds, (1 − d)/d, against those of the hour with the lowest rate;
- **weekday**: `weekdays.odds`, Monday to Sunday;
- **payday**: `paydays.odds[n]` on the n-th day after one of the customer's country's paydays
  (`recoup.dunning.policy_paydays`: conventions from package data, paid early on a closed day),
  for the decline codes in `paydays.codes` only;
- **age**: `age.odds`, steps by whole days since the failure (`[[0, 1.0], [14, 1.2]]`), and
  `age.retry_odds` once per retry already made;
- **segments**: every `[[segments]]` rule whose `decline_code`, `network` and `country` (each
  optional) match multiplies by its `odds`, and its `hours`/`weekdays` tables, when given,
  replace the world's for that segment (the last matching rule's).

A decline the taxonomy does not call soft (a hard decline, or one that needs the customer)
never succeeds by timing: its probability is 0. Pure: no clock, no I/O but the package's data.

The file format (TOML) is the same inline in a scenario file's `[world]` table; the packaged
worlds (`data/worlds/*.toml`) say where each figure comes from.
"""

from __future__ import annotations

import bisect
import functools
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from importlib import resources
from typing import Any

from recoup.dunning.policy_paydays import country_paydays, is_payday
from recoup.dunning.taxonomy import DeclineClass, classify
from recoup.errors import ConfigError, InvalidInput
from recoup.timekeeping.calendar import BusinessCalendar

WORLDS = ("calibrated", "flat", "night-owl")  # packaged worlds, by name
DEFAULT_WORLD = "calibrated"
DEFAULT_BASE = "default"  # the `[base]` key for any soft decline not listed
_WEEKDAYS = 7
_HOURS = 24
_MAX_PAYDAY_DAYS = 10


@dataclass(frozen=True, kw_only=True)
class Segment:
    """Who is charged: the decline that opened dunning (and its advice codes, which may make
    it hard: `do_not_try_again`), the card's network and the customer's country (ISO 3166-1
    alpha-2)."""

    decline_code: str
    network: str | None = None
    country: str | None = None
    advice_codes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TryHistory:
    """What came before this try: the failure that opened dunning and the retries since."""

    first_failed_at: datetime
    retries_before: int = 0


@dataclass(frozen=True, kw_only=True)
class SegmentRule:
    """A `[[segments]]` rule: where it applies (None matches anything) and what it changes."""

    decline_code: str | None = None
    network: str | None = None
    country: str | None = None
    odds: float = 1.0
    hour_odds: tuple[float, ...] | None = None
    weekday_odds: tuple[float, ...] | None = None

    def matches(self, segment: Segment) -> bool:
        return (
            (self.decline_code is None or self.decline_code == segment.decline_code)
            and (self.network is None or self.network == (segment.network or "").lower())
            and (self.country is None or self.country == (segment.country or "").upper())
        )


@dataclass(frozen=True, kw_only=True)
class World:
    """A validated world (see the module docstring for the model and the file format)."""

    name: str
    description: str = ""
    # Left out of the hash (a dict): worlds key caches, and equal worlds still compare equal.
    base: dict[str, float] = field(default_factory=lambda: {DEFAULT_BASE: 0.2}, hash=False)
    hour_odds: tuple[float, ...] = (1.0,) * _HOURS
    weekday_odds: tuple[float, ...] = (1.0,) * _WEEKDAYS
    payday_odds: tuple[float, ...] = ()
    payday_codes: frozenset[str] = frozenset()
    age_odds: tuple[tuple[int, float], ...] = ((0, 1.0),)
    retry_odds: float = 1.0
    segments: tuple[SegmentRule, ...] = ()

    @property
    def has_time_structure(self) -> bool:
        """Whether the hour, weekday or day of the month can change a try's odds."""
        flat = (1.0,)
        return bool(
            set(self.hour_odds) - set(flat)
            or set(self.weekday_odds) - set(flat)
            or set(self.payday_odds) - set(flat)
            or any(r.hour_odds or r.weekday_odds for r in self.segments)
        )

    def base_for(self, decline_code: str) -> float:
        return self.base.get(decline_code, self.base[DEFAULT_BASE])


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


@functools.lru_cache(maxsize=256)
def _country_calendar(country: str) -> BusinessCalendar:
    try:
        return BusinessCalendar(country=country)
    except InvalidInput:  # a country the holidays package does not know: weekends only
        return BusinessCalendar()


def days_after_payday(country: str | None, day: date, *, within: int) -> int | None:
    """How many days `day` is after the latest payday of `country` (0: it is one), looking
    back at most `within` days; None when there is none (or no convention)."""
    rules = country_paydays(country)
    if not rules or country is None:
        return None
    calendar = _country_calendar(country.strip().upper())
    for back in range(within + 1):
        if is_payday(day - timedelta(days=back), rules, calendar):
            return back
    return None


def success_probability(
    world: World, segment: Segment, local_datetime: datetime, history: TryHistory
) -> float:
    """The chance that a retry at `local_datetime` (aware, in the customer's zone) succeeds
    for `segment` after `history` (the model in the module docstring); 0 for a decline that
    timing never cures."""
    if local_datetime.tzinfo is None:
        raise InvalidInput("local_datetime", local_datetime, "expected an aware local datetime")
    verdict = classify(segment.decline_code, segment.advice_codes)
    if verdict.decline_class is not DeclineClass.SOFT:
        return 0.0
    hour_odds, weekday_odds, odds = world.hour_odds, world.weekday_odds, 1.0
    for rule in world.segments:
        if rule.matches(segment):
            odds *= rule.odds
            hour_odds = rule.hour_odds or hour_odds
            weekday_odds = rule.weekday_odds or weekday_odds
    odds *= hour_odds[local_datetime.hour] * weekday_odds[local_datetime.weekday()]
    if world.payday_odds and segment.decline_code in world.payday_codes:
        after = days_after_payday(
            segment.country, local_datetime.date(), within=len(world.payday_odds) - 1
        )
        if after is not None:
            odds *= world.payday_odds[after]
    age_days = (local_datetime - history.first_failed_at).total_seconds() / 86_400
    steps = [day for day, _ in world.age_odds]
    index = bisect.bisect_right(steps, age_days) - 1
    if index >= 0:
        odds *= world.age_odds[index][1]
    odds *= world.retry_odds ** max(0, history.retries_before)
    return _sigmoid(_logit(world.base_for(segment.decline_code)) + math.log(odds))


# ---- the file -----------------------------------------------------------------------------


def _no_extra(data: dict[str, Any], allowed: set[str], path: str) -> None:
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{path}{key}", data[key], f"expected one of {sorted(allowed)}")


def _table(data: dict[str, Any], key: str, allowed: set[str], prefix: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{prefix}{key}", value, "expected a table")
    _no_extra(value, allowed, f"{prefix}{key}.")
    return value


def _number(path: str, value: Any, low: float, high: float, *, open_low: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and (value > low if open_low else value >= low) and value <= high:
        return float(value)
    bound = f"{low} < x" if open_low else f"{low} ≤ x"
    raise ConfigError(path, value, f"expected a number, {bound} ≤ {high}")


def _numbers(path: str, value: Any, size: int | None, low: float, high: float) -> tuple[float, ...]:
    if not isinstance(value, list) or (size is not None and len(value) != size) or not value:
        raise ConfigError(path, value, f"expected an array of {size or 'some'} numbers")
    return tuple(_number(f"{path}[{i}]", v, low, high, open_low=True) for i, v in enumerate(value))


def hour_odds_from_decline_rates(rates: Sequence[float]) -> tuple[float, ...]:
    """Odds multipliers by hour from decline rates by hour: (1 − d)/d against the best hour's."""
    best = min(rates)
    reference = (1.0 - best) / best
    return tuple(((1.0 - d) / d) / reference for d in rates)


def _hours(table: dict[str, Any], path: str) -> tuple[float, ...] | None:
    if "decline_rates" not in table:
        return None
    rates = _numbers(f"{path}.decline_rates", table["decline_rates"], _HOURS, 0.0, 0.99)
    return hour_odds_from_decline_rates(rates)


def _weekdays(table: dict[str, Any], path: str) -> tuple[float, ...] | None:
    if "odds" not in table:
        return None
    return _numbers(f"{path}.odds", table["odds"], _WEEKDAYS, 0.0, 100.0)


def _text(path: str, value: Any) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise ConfigError(path, value, "expected a non-empty text")
    return value


def _segment(raw: Any, path: str) -> SegmentRule:
    if not isinstance(raw, dict):
        raise ConfigError(path, raw, "expected a table ([[segments]])")
    _no_extra(raw, {"decline_code", "network", "country", "odds", "hours", "weekdays"}, f"{path}.")
    hours = _table(raw, "hours", {"decline_rates"}, f"{path}.")
    weekdays = _table(raw, "weekdays", {"odds"}, f"{path}.")
    code, network, country = (raw.get(k) for k in ("decline_code", "network", "country"))
    return SegmentRule(
        decline_code=None if code is None else _text(f"{path}.decline_code", code),
        network=None if network is None else _text(f"{path}.network", network).lower(),
        country=None if country is None else _text(f"{path}.country", country).upper(),
        odds=_number(f"{path}.odds", raw.get("odds", 1.0), 0.0, 100.0, open_low=True),
        hour_odds=_hours(hours, f"{path}.hours"),
        weekday_odds=_weekdays(weekdays, f"{path}.weekdays"),
    )


_TOP = {"name", "description", "base", "hours", "weekdays", "paydays", "age", "segments"}


def world_from_dict(data: dict[str, Any], *, name: str = "custom", prefix: str = "") -> World:
    """Validate parsed TOML (the module docstring's format); `ConfigError` naming the dotted
    path of the first bad value, after `prefix` (`world.` inside a scenario file)."""
    _no_extra(data, _TOP, prefix)
    base_raw = _table(data, "base", set(data.get("base", {})), prefix)
    base = {
        _text(f"{prefix}base", code): _number(f"{prefix}base.{code}", p, 0.0, 0.99, open_low=True)
        for code, p in base_raw.items()
    }
    base.setdefault(DEFAULT_BASE, 0.2)
    hours = _table(data, "hours", {"decline_rates"}, prefix)
    weekdays = _table(data, "weekdays", {"odds"}, prefix)
    paydays = _table(data, "paydays", {"odds", "codes"}, prefix)
    age = _table(data, "age", {"odds", "retry_odds"}, prefix)
    payday_odds: tuple[float, ...] = ()
    if "odds" in paydays:
        payday_odds = _numbers(f"{prefix}paydays.odds", paydays["odds"], None, 0.0, 100.0)
        if len(payday_odds) > _MAX_PAYDAY_DAYS:
            raise ConfigError(f"{prefix}paydays.odds", paydays["odds"], "expected at most 10")
    codes = paydays.get("codes", ["insufficient_funds"])
    if not isinstance(codes, list):
        raise ConfigError(f"{prefix}paydays.codes", codes, "expected an array of decline codes")
    steps: list[tuple[int, float]] = []
    for i, step in enumerate(age.get("odds", [[0, 1.0]])):
        path = f"{prefix}age.odds[{i}]"
        if not isinstance(step, list) or len(step) != 2 or isinstance(step[0], bool):
            raise ConfigError(path, step, "expected [days since the failure, odds]")
        if not isinstance(step[0], int) or step[0] < 0 or (steps and step[0] <= steps[-1][0]):
            raise ConfigError(path, step, "expected whole days ≥ 0, increasing")
        steps.append((step[0], _number(path, step[1], 0.0, 100.0, open_low=True)))
    segments = data.get("segments", [])
    if not isinstance(segments, list):
        raise ConfigError(f"{prefix}segments", segments, "expected an array of tables")
    return World(
        name=_text(f"{prefix}name", data.get("name", name)),
        description=str(data.get("description", "")),
        base=base,
        hour_odds=_hours(hours, f"{prefix}hours") or (1.0,) * _HOURS,
        weekday_odds=_weekdays(weekdays, f"{prefix}weekdays") or (1.0,) * _WEEKDAYS,
        payday_odds=payday_odds,
        payday_codes=frozenset(
            _text(f"{prefix}paydays.codes[{i}]", c) for i, c in enumerate(codes)
        ),
        age_odds=tuple(steps) or ((0, 1.0),),
        retry_odds=_number(
            f"{prefix}age.retry_odds", age.get("retry_odds", 1.0), 0.0, 100.0, open_low=True
        ),
        segments=tuple(_segment(s, f"{prefix}segments[{i}]") for i, s in enumerate(segments)),
    )


def parse_world(text: str, *, name: str = "custom") -> World:
    """A world from TOML text; `ConfigError` naming the field at fault."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("world", str(exc), "expected valid TOML") from None
    return world_from_dict(data, name=name)


def world_text(name: str) -> str:
    """The TOML text of a packaged world, with its sources."""
    if name not in WORLDS:
        raise InvalidInput("world", name, f"expected one of {list(WORLDS)} or a TOML file")
    path = resources.files("recoup.payments").joinpath(f"data/worlds/{name}.toml")
    return path.read_text("utf-8")


@functools.cache
def packaged_world(name: str = DEFAULT_WORLD) -> World:
    """A packaged world: `calibrated` (the default), `flat` (no time structure) or `night-owl`
    (its best hour far from 10:00)."""
    return parse_world(world_text(name), name=name)


__all__ = [
    "DEFAULT_WORLD",
    "WORLDS",
    "Segment",
    "SegmentRule",
    "TryHistory",
    "World",
    "days_after_payday",
    "hour_odds_from_decline_rates",
    "packaged_world",
    "parse_world",
    "success_probability",
    "world_from_dict",
    "world_text",
]
