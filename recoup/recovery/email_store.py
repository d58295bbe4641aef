"""What sending customers' emails keeps (migration 0011_messages.sql): a tenant's message
settings (its SMTP server, sealed: `recoup.sealed`; its sender; its update-card link) and the
email ledger, one row per message key (`recoup.messages.planning.message_key`).

The ledger is what makes an email once per event: a row is written `planned` when its job is
made, `sending` (with the Message-ID it will carry, and one more try) before the SMTP server is
given the message, and `sent` (with the server's reply) after it accepted it. A run that finds
`sent` or `suppressed` sends nothing; one that finds `sending` (its last try died between the
two records) sends again with the Message-ID stored, never a new one
(`recoup.recovery.emails`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from recoup.timekeeping.instants import require_aware


class EmailState(StrEnum):
    PLANNED = "planned"  # its job is made, nothing sent
    SENDING = "sending"  # handed to the SMTP server, its acceptance not yet recorded
    SENT = "sent"  # the server accepted it (`smtp_reply`)
    SUPPRESSED = "suppressed"  # the address is suppressed (bounced, or asked): not sent
    FAILED = "failed"  # refused for good (a bounce, no address): not sent
    CANCELLED = "cancelled"  # the invoice moved on before its time (paid, stopped): not sent

    @property
    def is_final(self) -> bool:
        return self not in (EmailState.PLANNED, EmailState.SENDING)


@dataclass(frozen=True, kw_only=True)
class MessageSettings:
    """A tenant's email settings. `smtp_url` as stored (sealed), opened only by the process
    that sends; None: no SMTP server, so no emails."""

    tenant: str
    smtp_url: str | None
    email_from: str | None
    reply_to: str | None
    update_card_url: str | None  # a template with {token}
    templates_dir: str | None  # the tenant's own templates, overriding the shipped ones
    allow_unsubscribe: bool
    updated_at: datetime

    def __post_init__(self) -> None:
        require_aware("updated_at", self.updated_at)

    @property
    def sends(self) -> bool:
        """Whether emails go out: an SMTP server and a sender are set."""
        return self.smtp_url is not None and self.email_from is not None

    def __repr__(self) -> str:
        return (
            f"MessageSettings(tenant={self.tenant!r}, smtp_url={'…' if self.smtp_url else None},"
            f" email_from={self.email_from!r})"
        )


@dataclass(frozen=True, kw_only=True)
class Email:
    """One row of the ledger: what became of one message key."""

    tenant: str
    key: str
    kind: str  # a `MessageKind` value
    customer_id: str
    invoice_id: str | None
    send_at: datetime
    state: EmailState
    created_at: datetime
    updated_at: datetime
    job_id: str | None = None
    recipient: str | None = None
    message_id: str | None = None  # the Message-ID header, fixed by the first `sending`
    smtp_reply: str | None = None  # the server's reply (or why nothing was sent)
    tries: int = 0  # times the message was handed to an SMTP server
    job_attempt: int | None = None  # the attempt of its job that last set it `sending`
    sent_at: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("send_at", "created_at", "updated_at"):
            require_aware(name, getattr(self, name))
        if self.sent_at is not None:
            require_aware("sent_at", self.sent_at)


class MessageStore(Protocol):
    def get_message_settings(self, tenant: str) -> MessageSettings | None: ...

    def put_message_settings(self, settings: MessageSettings) -> MessageSettings: ...

    def list_message_settings(self) -> list[MessageSettings]:
        """Every tenant's (to seal their SMTP URLs again with a new secret key)."""
        ...

    def plan_email(self, email: Email) -> Email:
        """Insert `email` unless its key has a row; return the row stored."""
        ...

    def plan_emails(self, emails: Sequence[Email]) -> None:
        """`plan_email` for each of `emails`, in one write and without reading the rows back
        (a transition's emails, planned inside its unit of work)."""
        ...

    def get_email(self, tenant: str, key: str) -> Email | None: ...

    def record_email(self, email: Email, *, was: EmailState, tries: int) -> Email | None:
        """Write `email` over its key's row if the row is still in state `was` after `tries`
        tries (compare-and-set: of two runs of one message, one wins); None if it is not."""
        ...

    def invoice_emails(self, tenant: str, invoice_id: str) -> list[Email]:
        """An invoice's emails, by send_at."""
        ...

    def email_counts(self, tenant: str) -> dict[tuple[str, EmailState], int]:
        """How many emails of each kind are in each state."""
        ...

    def put_payment_page(self, tenant: str, invoice_id: str, url: str, *, at: datetime) -> None:
        """The provider's page where the invoice's customer pays or updates the card (Stripe's
        `hosted_invoice_url`), as the intake last read it."""
        ...

    def payment_page(self, tenant: str, invoice_id: str) -> str | None: ...


__all__ = ["Email", "EmailState", "MessageSettings", "MessageStore"]
