"""The payment provider seam: what the charge side (`recoup.receiver`, the example billing app)
needs from a gateway, and nothing more.

Two operations, both keyed by the provider's idempotency key (`charge:{invoice}:{attempt}`):

- `charge(request)` moves money at most once per key: a second call with the same key returns
  the first call's `Charge` and charges nothing;
- `find_charge(key)` looks a key up, so an ambiguous call (a timeout) is reconciled before any
  new charge is tried.

A call whose outcome is unknown raises `ProviderTimeout` (the money may have moved: look the
key up); a call refused before anything happened raises `ProviderUnavailable` (nothing moved:
safe to try again later). Declines are not exceptions: they are `Charge`s whose status says
whether retrying can help.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from recoup.errors import InvalidInput, RecoupError
from recoup.timekeeping.instants import require_aware


class ChargeStatus(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED_TERMINAL = "failed_terminal"  # a hard decline: retrying this card cannot help
    FAILED_RETRYABLE = "failed_retryable"  # a soft decline: a later attempt may succeed
    PENDING = "pending"  # ambiguous (the provider timed out): reconcile by key before charging


class PaymentError(RecoupError):
    """Base of the provider errors."""


class ProviderTimeout(PaymentError):
    """The call's outcome is unknown: the charge may or may not have happened."""

    http_status = 504


class ProviderUnavailable(PaymentError):
    """The provider refused the call before doing anything (outage, maintenance window)."""

    http_status = 503


class IdempotencyKeyMismatch(PaymentError, InvalidInput):
    """The key was already used for a different charge (another amount, currency or invoice).
    Nothing was charged; the caller has a bug, so retrying with this key cannot help."""

    def __init__(self, idempotency_key: str, allowed: str) -> None:
        InvalidInput.__init__(self, "idempotency_key", idempotency_key, allowed)


@dataclass(frozen=True, kw_only=True)
class ChargeRequest:
    """One charge of `amount` minor units of `currency` for an invoice, under the provider's
    idempotency key. `at` is the instant of the attempt in simulated time (test clocks, the
    demo): the simulated gateway decides time-dependent behaviour from it; real providers
    ignore it."""

    idempotency_key: str
    invoice_id: str
    customer_id: str
    amount: int
    currency: str
    card: str | None = None  # the card fingerprint
    gateway: str | None = None
    merchant_id: str | None = None
    at: datetime | None = None

    def __post_init__(self) -> None:
        if not self.idempotency_key:
            raise InvalidInput("idempotency_key", self.idempotency_key, "expected a non-empty key")
        if self.amount <= 0:
            raise InvalidInput("amount", self.amount, "expected a positive integer (minor units)")
        if len(self.currency) != 3 or not self.currency.isalpha():
            raise InvalidInput("currency", self.currency, "expected an ISO 4217 code such as 'usd'")
        if self.at is not None:
            require_aware("at", self.at)


@dataclass(frozen=True, kw_only=True)
class Charge:
    """What the provider did with one key: `SUCCEEDED` or a decline (`FAILED_*`, with the
    decline and advice codes the provider gave)."""

    id: str
    idempotency_key: str
    status: ChargeStatus
    amount: int
    currency: str
    created_at: datetime
    decline_code: str | None = None
    advice_code: str | None = None

    def __post_init__(self) -> None:
        require_aware("created_at", self.created_at)


class PaymentProvider(Protocol):
    def charge(self, request: ChargeRequest) -> Charge:
        """Charge once per `request.idempotency_key` (a repeat returns the first `Charge`).
        Raises `ProviderTimeout` when the outcome is unknown, `ProviderUnavailable` when
        nothing was done."""
        ...

    def find_charge(self, idempotency_key: str) -> Charge | None:
        """The charge made under that key, or None if the provider never made one. Raises
        `ProviderUnavailable` when it cannot answer."""
        ...


__all__ = [
    "Charge",
    "ChargeRequest",
    "ChargeStatus",
    "IdempotencyKeyMismatch",
    "PaymentError",
    "PaymentProvider",
    "ProviderTimeout",
    "ProviderUnavailable",
]
