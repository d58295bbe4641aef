"""A customer's access state, as their invoices in dunning give it (pure: time is an
argument).

One invoice gives:

| invoice                                        | access       |
|------------------------------------------------|--------------|
| none in dunning, `recovered`, `cancelled`      | `active`     |
| `retrying` or `awaiting_customer`, before failure + `grace_days` | `grace` |
| `retrying` or `awaiting_customer`, from then on | `restricted` |
| `exhausted`, final action `pause_access` or `cancel` | `paused` |
| `exhausted`, final action `mark_uncollectible` or `leave_past_due` | `restricted` |

and a customer has the worst access of their invoices (`active` < `grace` < `restricted` <
`paused`): a customer with an invoice exhausted and paused and another one retrying is paused.
A payment (recovered) gives `active` back; an invoice whose dunning was stopped without a
payment (`cancelled`: the subscription ended, the invoice was voided) holds nothing back, as
what follows a cancellation is the app's to decide, not dunning's.

Only one change happens with time alone, with no message about the invoice: the end of a
grace period while the invoice is still open (`next_change`); the runtime schedules a job at
that instant. Every other change follows a transition of an invoice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from recoup.dunning.invoice import InvoiceState
from recoup.timekeeping.instants import require_aware


class Access(StrEnum):
    """What a customer may use while their payments are in dunning: the one field an app
    gates features on. Ordered from the most to the least access (`rank`)."""

    ACTIVE = "active"  # nothing owed in dunning
    GRACE = "grace"  # a payment failed, retries run: full use for the grace period
    RESTRICTED = "restricted"  # retries still run past the grace, or the debt stays open
    PAUSED = "paused"  # the final action paused access or cancelled the subscription

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Access.ACTIVE: 0, Access.GRACE: 1, Access.RESTRICTED: 2, Access.PAUSED: 3}
_OPEN = (InvoiceState.RETRYING, InvoiceState.AWAITING_CUSTOMER)
# The final actions that end the customer's access when retries are exhausted; the others
# (write the invoice off, leave it past due) keep a debt open: restricted until it is paid.
PAUSING_ACTIONS = frozenset({"pause_access", "cancel"})


@dataclass(frozen=True, kw_only=True)
class Standing:
    """What access needs of one invoice: its state and final action, when it failed, and its
    policy's grace period."""

    invoice_id: str
    state: InvoiceState
    final_action: str
    failed_at: datetime
    grace: timedelta

    def __post_init__(self) -> None:
        require_aware("failed_at", self.failed_at)

    @property
    def grace_ends(self) -> datetime:
        return self.failed_at + self.grace


def invoice_access(standing: Standing, *, now: datetime) -> Access:
    """The access one invoice gives at `now` (the table in the module docstring)."""
    state = standing.state
    if state in _OPEN:
        return Access.GRACE if now < standing.grace_ends else Access.RESTRICTED
    if state is InvoiceState.EXHAUSTED:
        if standing.final_action in PAUSING_ACTIONS:
            return Access.PAUSED
        return Access.RESTRICTED
    return Access.ACTIVE  # recovered, cancelled


def customer_access(standings: Iterable[Standing], *, now: datetime) -> Access:
    """The worst access of the customer's invoices at `now`; `active` with none."""
    return max(
        (invoice_access(s, now=now) for s in standings), key=lambda a: a.rank, default=Access.ACTIVE
    )


def next_change(standings: Iterable[Standing], *, now: datetime) -> tuple[datetime, str] | None:
    """The first instant after `now` at which an invoice's access changes with time alone (a
    grace period ending while the invoice is open), and that invoice; None if there is none.
    The customer's access may stay the same then (another invoice is worse already)."""
    ends = [
        (s.grace_ends, s.invoice_id) for s in standings if s.state in _OPEN and s.grace_ends > now
    ]
    return min(ends, default=None)


__all__ = [
    "PAUSING_ACTIONS",
    "Access",
    "Standing",
    "customer_access",
    "invoice_access",
    "next_change",
]
