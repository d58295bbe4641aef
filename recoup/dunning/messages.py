"""What the invoice lifecycle takes and gives: messages in (an attempt's outcome, a payment,
a card update, a deadline), commands out (schedule, cancel, deadline), and the records a
transition needs (the opening failure, the planning context)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from recoup.dunning.failure import ChargeFailure
from recoup.dunning.invoice import (
    AttemptRecord,
    Invoice,
    InvoiceEvent,
)
from recoup.dunning.learned_planning import Learning
from recoup.dunning.limits import CardAttempt
from recoup.dunning.policy import DunningPolicy
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import require_aware

ReportedOutcome = Literal[
    "succeeded", "failed", "already_handled", "closed", "pending", "awaiting_report", "errored"
]
REPORTED_OUTCOMES: tuple[ReportedOutcome, ...] = (
    "succeeded",
    "failed",
    "already_handled",  # the charge side holds the invoice as paid another way
    "closed",  # the charge side closed the invoice without a payment (void, uncollectible)
    "pending",
    "awaiting_report",
    "errored",
)


# -- messages in ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AttemptReported:
    """What the charge endpoint answered for attempt `attempt` (or what was reported later)."""

    attempt: int
    outcome: ReportedOutcome
    at: datetime  # when the answer arrived
    decline_code: str | None = None
    advice_code: str | None = None
    detail: str | None = None  # for `errored`: what the endpoint said

    def __post_init__(self) -> None:
        require_aware("at", self.at)
        if self.outcome not in REPORTED_OUTCOMES:
            raise InvalidInput("outcome", self.outcome, f"expected one of {REPORTED_OUTCOMES}")


@dataclass(frozen=True, kw_only=True)
class PaidOutOfBand:
    at: datetime

    def __post_init__(self) -> None:
        require_aware("at", self.at)


@dataclass(frozen=True, kw_only=True)
class PaymentMethodUpdated:
    at: datetime

    def __post_init__(self) -> None:
        require_aware("at", self.at)


@dataclass(frozen=True, kw_only=True)
class DeadlinePassed:
    """The invoice's deadline job ran: an invoice still awaiting its customer is exhausted."""

    at: datetime

    def __post_init__(self) -> None:
        require_aware("at", self.at)


STOP_REASON_MAX = 200  # characters of a stop's reason


@dataclass(frozen=True, kw_only=True)
class DunningStopped:
    """Stop dunning an invoice without a payment: its subscription was cancelled, the invoice
    voided or written off, or an operator stopped it. `reason` is a short word or phrase
    (`subscription_deleted`, `invoice_voided`, `operator`, …), stored and sent."""

    at: datetime
    reason: str

    def __post_init__(self) -> None:
        require_aware("at", self.at)
        if not self.reason.strip() or len(self.reason) > STOP_REASON_MAX:
            raise InvalidInput("reason", self.reason, f"expected 1 to {STOP_REASON_MAX} characters")


Message = AttemptReported | PaidOutOfBand | PaymentMethodUpdated | DeadlinePassed | DunningStopped


# -- commands out --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ScheduleAttempt:
    attempt: AttemptRecord


@dataclass(frozen=True, kw_only=True)
class CancelAttempt:
    attempt: AttemptRecord


@dataclass(frozen=True, kw_only=True)
class ScheduleDeadline:
    """Run the invoice's deadline check at `at` (the customer has until then)."""

    at: datetime


Command = ScheduleAttempt | CancelAttempt | ScheduleDeadline


@dataclass(frozen=True, kw_only=True)
class Transition:
    invoice: Invoice
    events: tuple[InvoiceEvent, ...]
    commands: tuple[Command, ...]


@dataclass(frozen=True, kw_only=True)
class Planning:
    """What a re-plan needs besides the invoice: the policy it was planned with, the card's
    other attempts (network limits) and, for an adaptive policy, what the tenant's log has
    taught (`learned_planning.Learning`; None: the static plan)."""

    policy: DunningPolicy
    history: Sequence[CardAttempt] = ()
    learning: Learning | None = None


@dataclass(frozen=True, kw_only=True)
class Opening:
    """A reported failure with what `open_invoice` stores beside it: the tenant, the charge
    target the retries ask, and the policy (the experiment's arm) the invoice is planned by."""

    tenant: str
    failure: ChargeFailure
    charge_url: str
    policy: DunningPolicy


__all__ = [
    "REPORTED_OUTCOMES",
    "AttemptReported",
    "CancelAttempt",
    "Command",
    "DeadlinePassed",
    "DunningStopped",
    "Message",
    "Opening",
    "PaidOutOfBand",
    "PaymentMethodUpdated",
    "Planning",
    "ReportedOutcome",
    "ScheduleAttempt",
    "ScheduleDeadline",
    "Transition",
]
