"""What the planner decides: a closed union of frozen values, and their JSON shape.

    Decision = Retry | NoRetry | AwaitCustomer

Match a `Decision` exhaustively (`match` with `assert_never` in the last arm); adding a kind
then fails type checking everywhere it is handled.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, assert_never

from recoup.dunning.attempt_timing import AttemptTiming
from recoup.dunning.policy import FinalAction
from recoup.timekeeping.instants import format_local, format_utc


def idempotency_key(invoice: str, attempt: int) -> str:
    """The provider idempotency key of a retry: a duplicate trigger rebuilds the same key."""
    return f"retry:{invoice}:{attempt}"


def job_name(invoice: str, attempt: int) -> str:
    """The scheduler job name of a retry: one live job per (invoice, attempt)."""
    return f"dunning-retry-{invoice}-{attempt}"


@dataclass(frozen=True, kw_only=True)
class PlannedAttempt:
    """One retry: its number (1-based), UTC instant and local reading in the customer's zone;
    `timing`: the adaptive decision that placed it (None under a static policy)."""

    invoice: str
    attempt: int
    at: datetime
    local: datetime
    timing: AttemptTiming | None = None

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(self.invoice, self.attempt)

    @property
    def name(self) -> str:
        return job_name(self.invoice, self.attempt)

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "at": format_utc(self.at),
            "local": format_local(self.local),
            "idempotency_key": self.idempotency_key,
            "name": self.name,
        }


@dataclass(frozen=True, kw_only=True)
class Retry:
    """Retry at each of `attempts` (non-empty, strictly increasing), then `after_last_failure`."""

    invoice: str
    attempts: tuple[PlannedAttempt, ...]
    reason: str
    after_last_failure: FinalAction


@dataclass(frozen=True, kw_only=True)
class NoRetry:
    """Do not retry this payment method; take `after_last_failure` now."""

    invoice: str
    reason: str
    after_last_failure: FinalAction


@dataclass(frozen=True, kw_only=True)
class AwaitCustomer:
    """Wait for a new or corrected payment method (or authentication), then retry once
    promptly; `after_last_failure` applies if none comes."""

    invoice: str
    reason: str
    after_last_failure: FinalAction


Decision = Retry | NoRetry | AwaitCustomer
DecisionKind = Literal["retry", "no_retry", "await_customer"]


def decision_kind(decision: Decision) -> DecisionKind:
    match decision:
        case Retry():
            return "retry"
        case NoRetry():
            return "no_retry"
        case AwaitCustomer():
            return "await_customer"
        case _:
            assert_never(decision)


def decision_as_dict(decision: Decision) -> dict[str, Any]:
    """The JSON shape of `recoup plan --json` (key order fixed)."""
    attempts = decision.attempts if isinstance(decision, Retry) else ()
    return {
        "invoice": decision.invoice,
        "decision": decision_kind(decision),
        "reason": decision.reason,
        "attempts": [a.as_dict() for a in attempts],
        "after_last_failure": decision.after_last_failure.value,
    }


__all__ = [
    "AwaitCustomer",
    "Decision",
    "DecisionKind",
    "NoRetry",
    "PlannedAttempt",
    "Retry",
    "decision_as_dict",
    "decision_kind",
    "idempotency_key",
    "job_name",
]
