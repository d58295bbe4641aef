"""What hosted charging keeps (migration 0010_hosted_charging.sql): a tenant's choice to have
Recoup charge its provider itself, with the tenant's API key (sealed: `recoup.sealed`), and
the ledger of those charges, one row per provider key `charge:{invoice}:{n}`.

The ledger is written `pending` before the provider is called and settled from its answer, so
that a crash, a kill or a timeout between the two leaves a row that the next try of the
attempt reconciles (looks the invoice up at the provider) before anything is paid again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Literal, Protocol

from recoup.errors import InvalidInput
from recoup.timekeeping.instants import require_aware

Provider = Literal["stripe"]
PROVIDERS: tuple[Provider, ...] = ("stripe",)

# The charge target of an invoice that Recoup charges itself through the tenant's Stripe
# account (`Invoice.charge_url`), chosen at its failure when the tenant charges with Stripe.
STRIPE_CHARGE_TARGET = "stripe:"


class HostedChargeState(StrEnum):
    PENDING = "pending"  # asked, answer unknown (or not asked yet): look it up before paying
    SUCCEEDED = "succeeded"
    DECLINED = "declined"
    PAID_ELSEWHERE = "paid_elsewhere"  # the invoice was paid before this attempt
    CLOSED = "closed"  # the invoice was closed without a payment (void, uncollectible)
    ACTION_REQUIRED = "action_required"  # the customer must authenticate

    @property
    def is_settled(self) -> bool:
        return self is not HostedChargeState.PENDING


@dataclass(frozen=True, kw_only=True)
class HostedCharging:
    """A tenant's attempts are charged by Recoup through `provider`; `api_key` as stored
    (sealed), opened only by the process that charges."""

    tenant: str
    provider: Provider
    api_key: str
    updated_at: datetime

    def __post_init__(self) -> None:
        require_aware("updated_at", self.updated_at)
        if self.provider not in PROVIDERS:
            raise InvalidInput("charge_with", self.provider, f"expected one of {PROVIDERS}")

    def __repr__(self) -> str:
        return f"HostedCharging(tenant={self.tenant!r}, provider={self.provider!r}, api_key=…)"


@dataclass(frozen=True, kw_only=True)
class HostedCharge:
    """One row of the ledger: what became of one attempt's charge."""

    tenant: str
    charge_key: str
    invoice_id: str
    attempt: int
    state: HostedChargeState
    created_at: datetime
    updated_at: datetime
    provider_charge_id: str | None = None
    decline_code: str | None = None
    advice_code: str | None = None
    request_id: str | None = None
    calls: int = 0  # pay requests sent under this key

    def __post_init__(self) -> None:
        require_aware("created_at", self.created_at)
        require_aware("updated_at", self.updated_at)


class HostedChargeStore(Protocol):
    def get_hosted_charging(self, tenant: str) -> HostedCharging | None: ...

    def put_hosted_charging(self, charging: HostedCharging) -> HostedCharging: ...

    def delete_hosted_charging(self, tenant: str) -> bool:
        """True if the tenant had hosted charging (its attempts go to `charge_url` again)."""
        ...

    def list_hosted_charging(self) -> list[HostedCharging]:
        """Every tenant's (to seal their keys again with a new secret key)."""
        ...

    def get_hosted_charge(self, tenant: str, charge_key: str) -> HostedCharge | None: ...

    def begin_hosted_charge(self, charge: HostedCharge) -> HostedCharge:
        """Insert `charge` (pending) unless its key has a row; return the row stored."""
        ...

    def record_hosted_charge(self, charge: HostedCharge) -> HostedCharge:
        """Write `charge` over its key's row (state, codes, request id, calls)."""
        ...

    def hosted_charges(self, tenant: str, invoice_id: str) -> list[HostedCharge]:
        """An invoice's charges, by attempt."""
        ...


__all__ = [
    "PROVIDERS",
    "STRIPE_CHARGE_TARGET",
    "HostedCharge",
    "HostedChargeState",
    "HostedChargeStore",
    "HostedCharging",
    "Provider",
]
