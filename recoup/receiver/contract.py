"""The wire format between Recoup and a charge endpoint: the request body Recoup POSTs at each
retry's instant, and the answer it expects.

Request (`ChargeAttempt.from_json`), with headers `Idempotency-Key: retry:{invoice}:{n}` and the
Standard Webhooks signature:

    {"invoice_id": "inv_1", "attempt": 2, "idempotency_key": "retry:inv_1:2",
     "charge_idempotency_key": "charge:inv_1:2", "amount": 1999, "currency": "usd",
     "customer_id": "cus_1", "scheduled_at": "2026-12-02T16:12:00Z"}

Answer (`ChargeResult.to_json`), with status 200:

    {"outcome": "succeeded" | "failed" | "already_handled" | "pending",
     "decline_code": str | null, "advice_code": str | null}

`already_handled`: the invoice is no longer open (paid, or charged by another attempt); nothing
was done. `pending`: the provider's answer is unknown; Recoup asks again later with the same
keys. Fields Recoup may add later are ignored, so an older receiver keeps working.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from recoup.errors import InvalidInput
from recoup.payments.provider import Charge, ChargeStatus
from recoup.timekeeping.instants import parse_instant

_TEXT_FIELDS = ("invoice_id", "idempotency_key", "charge_idempotency_key", "customer_id")
MAX_TEXT_LENGTH = 255  # characters in an id or key, as Stripe allows for idempotency keys


class ChargeOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # a decline: decline_code and advice_code say which
    ALREADY_HANDLED = "already_handled"  # the invoice was paid already: nothing was done
    CLOSED = "closed"  # the invoice was closed without a payment: nothing was done
    PENDING = "pending"  # the provider's answer is unknown: ask again with the same keys


# Both kinds of decline are "failed" to Recoup: its decline rules read the codes, not our state.
OUTCOME_OF_STATUS: Final[Mapping[ChargeStatus, ChargeOutcome]] = {
    ChargeStatus.SUCCEEDED: ChargeOutcome.SUCCEEDED,
    ChargeStatus.FAILED_TERMINAL: ChargeOutcome.FAILED,
    ChargeStatus.FAILED_RETRYABLE: ChargeOutcome.FAILED,
    ChargeStatus.PENDING: ChargeOutcome.PENDING,
}


@dataclass(frozen=True, kw_only=True)
class ChargeAttempt:
    """One retry of one invoice, as Recoup asks for it."""

    invoice_id: str
    attempt: int
    idempotency_key: str
    charge_idempotency_key: str
    amount: int
    currency: str
    customer_id: str
    scheduled_at: datetime

    @classmethod
    def from_json(cls, body: bytes) -> ChargeAttempt:
        """Parse and check a request body; `InvalidInput` names the first field at fault."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise InvalidInput(
                "body", body[:80].decode("utf-8", "replace"), "expected JSON"
            ) from None
        if not isinstance(data, dict):
            raise InvalidInput("body", type(data).__name__, "expected a JSON object")
        for name in (*_TEXT_FIELDS, "currency", "scheduled_at"):
            _require_text(data, name)
        for name in ("attempt", "amount"):
            value = data.get(name)
            # bool is an int in Python, never in the contract.
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(name, value, "expected a positive integer")
        currency = data["currency"]
        if len(currency) != 3 or not currency.isascii() or not currency.isalpha():
            raise InvalidInput("currency", currency, "expected an ISO 4217 code such as 'usd'")
        return cls(
            invoice_id=data["invoice_id"],
            attempt=data["attempt"],
            idempotency_key=data["idempotency_key"],
            charge_idempotency_key=data["charge_idempotency_key"],
            amount=data["amount"],
            currency=currency.lower(),
            customer_id=data["customer_id"],
            scheduled_at=parse_instant("scheduled_at", data["scheduled_at"]),
        )


def _require_text(data: dict[str, Any], name: str) -> None:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(name, value, "expected a non-empty string")
    if len(value) > MAX_TEXT_LENGTH:
        raise InvalidInput(name, value[:40] + "…", f"expected at most {MAX_TEXT_LENGTH} characters")


@dataclass(frozen=True, kw_only=True)
class ChargeResult:
    """What the endpoint answers for one attempt; `charge_id` is the provider's charge, when
    one is known (it is not part of the answer to Recoup)."""

    outcome: ChargeOutcome
    decline_code: str | None = None
    advice_code: str | None = None
    charge_id: str | None = None

    @classmethod
    def of_charge(cls, charge: Charge) -> ChargeResult:
        """The answer for a charge the provider made (or declined) under the attempt's key."""
        return cls(
            outcome=OUTCOME_OF_STATUS[charge.status],
            decline_code=charge.decline_code,
            advice_code=charge.advice_code,
            charge_id=charge.id,
        )

    def to_json(self) -> dict[str, str | None]:
        return {
            "outcome": self.outcome.value,
            "decline_code": self.decline_code,
            "advice_code": self.advice_code,
        }


ALREADY_HANDLED = ChargeResult(outcome=ChargeOutcome.ALREADY_HANDLED)
CLOSED = ChargeResult(outcome=ChargeOutcome.CLOSED)
PENDING = ChargeResult(outcome=ChargeOutcome.PENDING)

__all__ = [
    "ALREADY_HANDLED",
    "CLOSED",
    "MAX_TEXT_LENGTH",
    "OUTCOME_OF_STATUS",
    "PENDING",
    "ChargeAttempt",
    "ChargeOutcome",
    "ChargeResult",
]
