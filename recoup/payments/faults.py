"""Faults to inject into the simulated gateway, and the scope each one applies to.

A `Fault` is a kind of misbehaviour plus a scope. The kinds, in the order the gateway applies
them to one charge call:

- `UNAVAILABLE`: refuse with `ProviderUnavailable`, doing nothing (an outage, a maintenance
  window of one gateway or one merchant);
- `TIMEOUT_BEFORE`: raise `ProviderTimeout` without charging (the request was lost);
- `DUPLICATE`: process the request twice, as a retried delivery would; the idempotency key
  must keep it to one charge;
- `TIMEOUT_AFTER`: process the charge, then raise `ProviderTimeout` (the ambiguous case: the
  money moved but the caller does not know it);
- `SLOW`: hold the answer for `delay_seconds`.

Any fault may carry `delay_seconds`: the call is held that long before it answers or raises
(a timeout that takes its time). The scope narrows which charge calls a fault hits; every
filter given must match: `times` (only the next N matching calls), the idempotency key, the
invoice, the card, the gateway name, the merchant id, and a window `[start, end)` on the
call's instant (`ChargeRequest.at`, else the gateway's clock). A fault with no scope hits
every call.

`find_charge` is only refused by an outage: an `UNAVAILABLE` fault with no filter other than
its window (and no `times`), whose window holds the gateway clock's now.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from recoup.errors import InvalidInput
from recoup.payments.provider import ChargeRequest
from recoup.timekeeping.instants import format_utc, require_aware

MAX_DELAY_SECONDS = 300.0  # a slow answer longer than this is an outage, not a slow answer


class FaultKind(StrEnum):
    UNAVAILABLE = "unavailable"
    TIMEOUT_BEFORE = "timeout_before"
    DUPLICATE = "duplicate"
    TIMEOUT_AFTER = "timeout_after"
    SLOW = "slow"


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One injected fault: its kind and the calls it hits (see the module docstring)."""

    kind: FaultKind
    times: int | None = None
    idempotency_key: str | None = None
    invoice_id: str | None = None
    card: str | None = None
    gateway: str | None = None
    merchant_id: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    delay_seconds: float = 0.0
    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FaultKind(self.kind))
        if self.times is not None and (isinstance(self.times, bool) or self.times < 1):
            raise InvalidInput("times", self.times, "expected a count ≥ 1, or none for every call")
        for name in ("idempotency_key", "invoice_id", "card", "gateway", "merchant_id"):
            value = getattr(self, name)
            if value is not None and not value:
                raise InvalidInput(name, value, "expected a non-empty string, or none")
        for name in ("start", "end"):
            instant = getattr(self, name)
            if instant is not None:
                object.__setattr__(self, name, require_aware(name, instant).astimezone(UTC))
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise InvalidInput("end", self.end.isoformat(), "expected an instant after start")
        delay = self.delay_seconds
        if not math.isfinite(delay) or not 0.0 <= delay <= MAX_DELAY_SECONDS:
            raise InvalidInput("delay_seconds", delay, f"expected 0–{MAX_DELAY_SECONDS:g} seconds")
        if self.kind is FaultKind.SLOW and delay == 0.0:
            raise InvalidInput("delay_seconds", delay, "a slow fault needs a positive delay")

    @classmethod
    def outage(cls, start: datetime, end: datetime, *, reason: str = "outage") -> Fault:
        """The whole gateway refuses every call (lookups included) in `[start, end)`."""
        return cls(kind=FaultKind.UNAVAILABLE, start=start, end=end, reason=reason)

    @classmethod
    def maintenance(
        cls,
        start: datetime,
        end: datetime,
        *,
        gateway: str | None = None,
        merchant_id: str | None = None,
    ) -> Fault:
        """One gateway's (or one merchant's) charges are refused in `[start, end)`."""
        if gateway is None and merchant_id is None:
            raise InvalidInput("gateway", None, "a maintenance window names a gateway or merchant")
        return cls(
            kind=FaultKind.UNAVAILABLE,
            start=start,
            end=end,
            gateway=gateway,
            merchant_id=merchant_id,
            reason="maintenance",
        )

    @property
    def is_outage(self) -> bool:
        """Whether this fault refuses lookups too: unavailability scoped by time alone."""
        return (
            self.kind is FaultKind.UNAVAILABLE
            and self.times is None
            and self.idempotency_key is None
            and self.invoice_id is None
            and self.card is None
            and self.gateway is None
            and self.merchant_id is None
        )

    def covers(self, instant: datetime) -> bool:
        """Whether `instant` is inside the window `[start, end)` (an open side is unbounded)."""
        return (self.start is None or instant >= self.start) and (
            self.end is None or instant < self.end
        )

    def matches(self, request: ChargeRequest, instant: datetime) -> bool:
        """Whether this fault's scope (not counting `times`) holds for the call."""
        return (
            self.covers(instant)
            and _match(self.idempotency_key, request.idempotency_key)
            and _match(self.invoice_id, request.invoice_id)
            and _match(self.card, request.card)
            and _match(self.gateway, request.gateway)
            and _match(self.merchant_id, request.merchant_id)
        )

    def describe(self) -> str:
        """A short phrase for error messages: `maintenance of gateway 'stripe'`."""
        text = self.reason or self.kind.value.replace("_", " ")
        if self.gateway is not None:
            text += f" of gateway {self.gateway!r}"
        if self.merchant_id is not None:
            text += f" of merchant {self.merchant_id!r}"
        if self.end is not None:
            text += f" until {format_utc(self.end)}"
        return text


def _match(wanted: str | None, actual: str | None) -> bool:
    return wanted is None or wanted == actual


__all__ = ["MAX_DELAY_SECONDS", "Fault", "FaultKind"]
