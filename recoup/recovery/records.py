"""What the dunning runtime (`service.Dunning`) takes in and hands out: a failed charge
(`FailureReport`, checked as it is made), an invoice's timeline, and `KEEP`, a setting left
as it is."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypeVar

from recoup.dunning.failure import MAX_ID_LENGTH, ChargeFailure
from recoup.dunning.invoice import Invoice, InvoiceEvent
from recoup.jobs.model import Run
from recoup.recovery.contacts import display_name, email_address, locale_tag
from recoup.recovery.email_store import Email

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class FailureReport(ChargeFailure):
    """A failed charge handed to Recoup (`POST /v1/dunning/failures`): the failure itself
    (`dunning.failure.ChargeFailure`, which the invoice's opening carries as it is), where to
    ask for the retries, and who to write to."""

    charge_url: str | None = None  # default: the tenant's
    # Who to write to (`recovery.contacts`): stored on the customer, None keeps what is known.
    customer_email: str | None = None
    customer_name: str | None = None
    locale: str | None = None  # written babel's way (`de-DE` becomes `de_DE`)

    def __post_init__(self) -> None:
        super().__post_init__()
        # Frozen: the contact details are written once, in their one form, as they are made.
        if self.customer_email is not None:
            object.__setattr__(self, "customer_email", email_address(self.customer_email))
        if self.customer_name is not None:
            object.__setattr__(self, "customer_name", display_name(self.customer_name))
        if self.locale is not None:
            object.__setattr__(self, "locale", locale_tag(self.locale))


@dataclass(frozen=True, kw_only=True)
class Timeline:
    invoice: Invoice
    events: list[InvoiceEvent]
    runs: dict[int, list[Run]]  # attempt number → its job's run log
    emails: list[Email] = field(default_factory=list)  # the invoice's emails, by send_at
    email_runs: dict[str, list[Run]] = field(default_factory=dict)  # message key → run log


class Keep(enum.Enum):
    """A setting left as it is (`Dunning.configure`)."""

    KEEP = "keep"


KEEP = Keep.KEEP


def given_or_kept(given: T | Keep, stored: T) -> T:
    return stored if isinstance(given, Keep) else given


__all__ = ["KEEP", "MAX_ID_LENGTH", "FailureReport", "Keep", "Timeline", "given_or_kept"]
