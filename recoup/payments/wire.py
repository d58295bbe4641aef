"""The gateway's records as plain data (JSON bodies, the scenario file), validated strictly.

One set of shapes serves the HTTP server, the HTTP client and `recoup gateway --scenarios`, so
a scenario or a fault reads the same everywhere. Instants are ISO-8601 strings with an offset
(or TOML offset date-times), durations carry their unit in their name, money is an integer of
minor units:

    charge     {"idempotency_key": "charge:inv_1:1", "invoice_id": "inv_1",
                "customer_id": "cus_1", "amount": 1999, "currency": "usd",
                "card": "card_nsf", "gateway": "stripe", "merchant_id": "acct_1",
                "at": "2026-12-01T10:00:00Z"}           (card … at are optional)
    scenario   {"decline_code": "insufficient_funds", "advice_code": null,
                "clears_after_hours": 72, "paydays": [1, 15], "payday_dates": ["2026-12-24"],
                "window_days": 3, "timezone": "America/New_York", "clears_on_update": false,
                "combine": "any", "probability": 1.0, "world_odds": false,
                "network": "visa", "country": "US"}     (all but decline_code are optional)
    fault      {"kind": "unavailable", "times": null, "idempotency_key": null,
                "invoice_id": null, "card": null, "gateway": "stripe", "merchant_id": null,
                "start": "2026-12-01T02:00:00Z", "end": "2026-12-01T04:00:00Z",
                "delay_seconds": 0, "reason": "maintenance"}   (all but kind are optional)

Errors leave the server as problem+json whose `type` is `TYPE_BASE` + a slug. Unknown keys
are refused. Every error is `InvalidInput` (`ConfigError` for the scenario file)
whose field is the dotted path of the bad value (`cards.card_nsf.window_days`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

from recoup.errors import ConfigError, InvalidInput
from recoup.payments.faults import Fault, FaultKind
from recoup.payments.faults_in_force import InjectedFault
from recoup.payments.gateway import GatewayStats
from recoup.payments.provider import Charge, ChargeRequest, ChargeStatus
from recoup.payments.scenarios import DEFAULT_WINDOW_DAYS, Combine, Scenario
from recoup.payments.world import WORLDS, World, packaged_world, world_from_dict
from recoup.timekeeping.instants import format_utc, to_utc

TYPE_BASE = "urn:recoup:gateway:"  # problem types: stable names the client maps back


def _text_or_native(kind: type[date]) -> Any:
    """Accept ISO text or the native value (TOML gives dates and date-times), nothing else:
    pydantic's lax mode would read a bare number as a Unix timestamp."""

    def check(value: Any) -> Any:
        if isinstance(value, str | kind):
            return value
        raise ValueError(f"expected an ISO-8601 {kind.__name__} (text)")

    return BeforeValidator(check)


Instant = Annotated[AwareDatetime, Field(strict=False), _text_or_native(datetime)]
Day = Annotated[date, Field(strict=False), _text_or_native(date)]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


_M = TypeVar("_M", bound=_Shape)
_T = TypeVar("_T")


class ChargeShape(_Shape):
    idempotency_key: StrictStr | None = None  # may come in the Idempotency-Key header instead
    invoice_id: StrictStr
    customer_id: StrictStr
    amount: StrictInt
    currency: StrictStr
    card: StrictStr | None = None
    gateway: StrictStr | None = None
    merchant_id: StrictStr | None = None
    at: Instant | None = None


class ScenarioShape(_Shape):
    decline_code: StrictStr
    advice_code: StrictStr | None = None
    clears_after_hours: float | None = None
    paydays: list[StrictInt] = []
    payday_dates: list[Day] = []
    window_days: StrictInt = DEFAULT_WINDOW_DAYS
    timezone: StrictStr = "UTC"
    clears_on_update: StrictBool = False
    combine: Literal["any", "all"] = "any"
    probability: float = 1.0
    world_odds: StrictBool = False
    network: StrictStr | None = None
    country: StrictStr | None = None


class FaultShape(_Shape):
    kind: Literal["unavailable", "timeout_before", "duplicate", "timeout_after", "slow"]
    times: StrictInt | None = None
    idempotency_key: StrictStr | None = None
    invoice_id: StrictStr | None = None
    card: StrictStr | None = None
    gateway: StrictStr | None = None
    merchant_id: StrictStr | None = None
    start: Instant | None = None
    end: Instant | None = None
    delay_seconds: float = 0.0
    reason: StrictStr = ""


class CardShape(_Shape):
    fingerprint: StrictStr
    scenario: ScenarioShape | None = None


class UpdateShape(_Shape):
    at: Instant | None = None


class ChargeOutShape(_Shape):
    id: StrictStr
    idempotency_key: StrictStr
    status: Literal["succeeded", "failed_terminal", "failed_retryable", "pending"]
    amount: StrictInt
    currency: StrictStr
    created_at: Instant
    decline_code: StrictStr | None = None
    advice_code: StrictStr | None = None


class ScenarioFileShape(_Shape):
    world: StrictStr | dict[str, Any] | None = None  # a packaged world's name, or a table
    cards: dict[str, ScenarioShape] = {}
    faults: list[FaultShape] = []


@dataclass(frozen=True, kw_only=True)
class ScenarioFile:
    """A scenario file's content: the world (None: not given), card scenarios by
    fingerprint, and faults to inject."""

    cards: dict[str, Scenario]
    faults: tuple[Fault, ...]
    world: World | None = None


def _world(value: str | dict[str, Any] | None) -> World | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value not in WORLDS:
            raise ConfigError("world", value, f"expected one of {list(WORLDS)} or a [world] table")
        return packaged_world(value)
    return world_from_dict(value, prefix="world.")


def _validate(shape: type[_M], data: Any, prefix: str) -> _M:
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        path = ".".join(str(part) for part in (*_split(prefix), *error["loc"]))
        message = error["msg"].removeprefix("Value error, ")
        value = None if error["type"] == "missing" else error.get("input")
        raise InvalidInput(path or "body", value, message[:1].lower() + message[1:]) from None


def _split(prefix: str) -> tuple[str, ...]:
    return (prefix,) if prefix else ()


def _build(prefix: str, build: Callable[..., _T], /, **fields: Any) -> _T:
    """Call a record's constructor, naming the whole path of a field it refuses."""
    try:
        return build(**fields)
    except InvalidInput as exc:
        path = f"{prefix}.{exc.field}" if prefix else exc.field
        raise InvalidInput(path, exc.value, exc.allowed) from None


def _instant(value: datetime | None, field_name: str) -> datetime | None:
    return None if value is None else to_utc(field_name, value)


# Charges.


def charge_request_from_json(data: Any, *, header_key: str | None = None) -> ChargeRequest:
    """A `ChargeRequest` from a JSON body; the key comes from the body or `header_key`
    (both given: they must agree)."""
    shape = _validate(ChargeShape, data, "")
    key = shape.idempotency_key
    if header_key is not None:
        if key is not None and key != header_key:
            raise InvalidInput(
                "idempotency_key", key, f"expected the Idempotency-Key header's {header_key!r}"
            )
        key = header_key
    if key is None:
        raise InvalidInput("idempotency_key", None, "expected an Idempotency-Key header or field")
    return _build(
        "",
        ChargeRequest,
        idempotency_key=key,
        invoice_id=shape.invoice_id,
        customer_id=shape.customer_id,
        amount=shape.amount,
        currency=shape.currency,
        card=shape.card,
        gateway=shape.gateway,
        merchant_id=shape.merchant_id,
        at=_instant(shape.at, "at"),
    )


def charge_request_to_json(request: ChargeRequest) -> dict[str, Any]:
    return {
        "idempotency_key": request.idempotency_key,
        "invoice_id": request.invoice_id,
        "customer_id": request.customer_id,
        "amount": request.amount,
        "currency": request.currency,
        "card": request.card,
        "gateway": request.gateway,
        "merchant_id": request.merchant_id,
        "at": None if request.at is None else format_utc(request.at),
    }


def charge_to_json(charge: Charge) -> dict[str, Any]:
    return {
        "id": charge.id,
        "idempotency_key": charge.idempotency_key,
        "status": charge.status.value,
        "amount": charge.amount,
        "currency": charge.currency,
        "created_at": format_utc(charge.created_at),
        "decline_code": charge.decline_code,
        "advice_code": charge.advice_code,
    }


def charge_from_json(data: Any) -> Charge:
    shape = _validate(ChargeOutShape, data, "charge")
    return Charge(
        id=shape.id,
        idempotency_key=shape.idempotency_key,
        status=ChargeStatus(shape.status),
        amount=shape.amount,
        currency=shape.currency,
        created_at=shape.created_at.astimezone(UTC),
        decline_code=shape.decline_code,
        advice_code=shape.advice_code,
    )


# Scenarios and cards.


def _scenario(shape: ScenarioShape, prefix: str) -> Scenario:
    hours = shape.clears_after_hours
    if hours is not None and not 0 < hours <= 24 * 366 * 10:
        raise InvalidInput(f"{prefix}.clears_after_hours", hours, "expected 0 < hours ≤ 87840")
    return _build(
        prefix,
        Scenario,
        decline_code=shape.decline_code,
        advice_code=shape.advice_code,
        clears_after=None if hours is None else timedelta(hours=hours),
        paydays=tuple(shape.paydays),
        payday_dates=tuple(shape.payday_dates),
        window_days=shape.window_days,
        timezone=shape.timezone,
        clears_on_update=shape.clears_on_update,
        combine=Combine(shape.combine),
        probability=shape.probability,
        world_odds=shape.world_odds,
        network=shape.network,
        country=shape.country,
    )


def scenario_from_json(data: Any, *, prefix: str = "scenario") -> Scenario:
    return _scenario(_validate(ScenarioShape, data, prefix), prefix)


def scenario_to_json(scenario: Scenario) -> dict[str, Any]:
    after = scenario.clears_after
    return {
        "decline_code": scenario.decline_code,
        "advice_code": scenario.advice_code,
        "clears_after_hours": None if after is None else after / timedelta(hours=1),
        "paydays": list(scenario.paydays),
        "payday_dates": [d.isoformat() for d in scenario.payday_dates],
        "window_days": scenario.window_days,
        "timezone": scenario.timezone,
        "clears_on_update": scenario.clears_on_update,
        "combine": scenario.combine.value,
        "probability": scenario.probability,
        "world_odds": scenario.world_odds,
        "network": scenario.network,
        "country": scenario.country,
    }


def card_from_json(data: Any) -> tuple[str, Scenario | None]:
    """`(fingerprint, scenario)` from a `POST /cards` body."""
    shape = _validate(CardShape, data, "")
    if not shape.fingerprint or shape.fingerprint != shape.fingerprint.strip():
        raise InvalidInput("fingerprint", shape.fingerprint, "expected a card fingerprint")
    scenario = None if shape.scenario is None else _scenario(shape.scenario, "scenario")
    return shape.fingerprint, scenario


def update_from_json(data: Any) -> datetime | None:
    """The `at` of a `POST /cards/{fingerprint}/update` body (None: now)."""
    return _instant(_validate(UpdateShape, data, "").at, "at")


# Faults.


def _fault(shape: FaultShape, prefix: str) -> Fault:
    return _build(
        prefix,
        Fault,
        kind=FaultKind(shape.kind),
        times=shape.times,
        idempotency_key=shape.idempotency_key,
        invoice_id=shape.invoice_id,
        card=shape.card,
        gateway=shape.gateway,
        merchant_id=shape.merchant_id,
        start=_instant(shape.start, f"{prefix}.start" if prefix else "start"),
        end=_instant(shape.end, f"{prefix}.end" if prefix else "end"),
        delay_seconds=shape.delay_seconds,
        reason=shape.reason,
    )


def fault_from_json(data: Any, *, prefix: str = "") -> Fault:
    return _fault(_validate(FaultShape, data, prefix), prefix)


def fault_to_json(fault: Fault) -> dict[str, Any]:
    return {
        "kind": fault.kind.value,
        "times": fault.times,
        "idempotency_key": fault.idempotency_key,
        "invoice_id": fault.invoice_id,
        "card": fault.card,
        "gateway": fault.gateway,
        "merchant_id": fault.merchant_id,
        "start": None if fault.start is None else format_utc(fault.start),
        "end": None if fault.end is None else format_utc(fault.end),
        "delay_seconds": fault.delay_seconds,
        "reason": fault.reason,
    }


def injected_to_json(injected: InjectedFault) -> dict[str, Any]:
    return {"id": injected.id, "remaining": injected.remaining, **fault_to_json(injected.fault)}


def stats_to_json(stats: GatewayStats) -> dict[str, Any]:
    return {
        "calls": stats.calls,
        "deliveries": stats.deliveries,
        "replays": stats.replays,
        "succeeded": stats.succeeded,
        "declined": stats.declined,
        "refused": stats.refused,
        "timeouts": stats.timeouts,
        "faults_fired": stats.faults_fired,
        "charges_per_key": stats.charges_per_key,
        "double_charged_invoices": stats.double_charged_invoices,
    }


# The scenario file.


def parse_scenario_file(text: str) -> ScenarioFile:
    """A scenario file (TOML: `world`, `[cards.<fingerprint>]` scenario tables and
    `[[faults]]`); `ConfigError` naming the dotted path of the first bad value."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("toml", str(exc), "expected a valid TOML document") from None
    try:
        shape = _validate(ScenarioFileShape, data, "")
        cards = {fp: _scenario(s, f"cards.{fp}") for fp, s in shape.cards.items()}
        faults = tuple(_fault(f, f"faults.{i}") for i, f in enumerate(shape.faults))
    except InvalidInput as exc:
        raise ConfigError(exc.field, exc.value, exc.allowed) from None
    for fingerprint in cards:
        if not fingerprint or fingerprint != fingerprint.strip():
            raise ConfigError("cards", fingerprint, "expected card fingerprints as table names")
    return ScenarioFile(cards=cards, faults=faults, world=_world(shape.world))


__all__ = [
    "TYPE_BASE",
    "ScenarioFile",
    "card_from_json",
    "charge_from_json",
    "charge_request_from_json",
    "charge_request_to_json",
    "charge_to_json",
    "fault_from_json",
    "fault_to_json",
    "injected_to_json",
    "parse_scenario_file",
    "scenario_from_json",
    "scenario_to_json",
    "stats_to_json",
    "update_from_json",
]
