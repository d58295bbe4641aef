"""The email jobs, as values: `email_job(planned)` is the durable job that sends one planned
message (`recoup.messages.planning.PlannedMessage`) at its `send_at`, and `transition_emails`
the jobs (and ledger rows) a transition's events call for. The handler that runs them is
`recoup.recovery.emails`.

Each job's id is a uuid5 of the message key and its idempotency key `email:{key}`, so planning
a message twice (a replayed transition, a resync, a renewal told again) makes one job; its
ledger row, written `planned` here in the transition's unit of work, is what the handler reads
before it sends.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from recoup.dunning.invoice import ID_NAMESPACE, Invoice, InvoiceEvent, job_group
from recoup.dunning.policy import DunningPolicy
from recoup.jobs.model import CONTROL_CHARACTER, BackoffPolicy, NewJob, PythonTarget
from recoup.messages.kinds import MessageKind
from recoup.messages.planning import PlannedMessage, messages_for
from recoup.recovery.email_store import Email, EmailState, MessageStore
from recoup.recovery.job_specs import KEEP_JOBS_FOR
from recoup.timekeeping.instants import format_utc, parse_instant

EMAIL_HANDLER = "recoup.messages.email"
# An SMTP server down or refusing for a while (4xx, a wrong password being fixed): tried again
# from a minute up to six hours apart, for about three days.
EMAIL_RETRY = BackoffPolicy(
    max_attempts=16, min_backoff=timedelta(minutes=1), max_backoff=timedelta(hours=6)
)
EMAIL_TIMEOUT = timedelta(seconds=90)  # connect, STARTTLS, login and DATA, each 30 s at most


def email_job_id(tenant: str, key: str) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, f"email\x00{tenant}\x00{key}"))


def email_job(planned: PlannedMessage) -> NewJob:
    """The job that sends `planned` at its `send_at`: in its invoice's group (after the
    attempts of that invoice, never beside them), else in its customer's. Named by its
    invoice, else by what it answers (a card_expiring reminder: its renewal's id), never by
    the customer: a customer's id is the tenant's text, which may hold the '@' of a
    schedule's occurrences, and one customer may have two renewals' reminders live at once.
    (Reminders stored when they were named by their customer keep that name; they are found
    by their renewal's `reminder_job_id`.)"""
    group = (
        job_group(planned.invoice_id)
        if planned.invoice_id is not None
        else f"customer:{_escaped(planned.customer_id)}"
    )
    return NewJob(
        id=email_job_id(planned.tenant, planned.key),
        run_at=planned.send_at,
        target=PythonTarget(handler=EMAIL_HANDLER),
        tenant=planned.tenant,
        name=f"email-{planned.kind.replace('_', '-')}-{planned.invoice_id or planned.source}",
        group=group,
        payload=planned_payload(planned),
        idempotency_key=f"email:{planned.key}",
        retry=EMAIL_RETRY,
        timeout=EMAIL_TIMEOUT,
        keep_for=KEEP_JOBS_FOR,
    )


def _escaped(text: str) -> str:
    """`text` with each control character written as its escape (a tab as `\\x09`), which a
    job's group may not hold; any other id is itself, so a customer's group stays the one
    its earlier jobs have."""
    return CONTROL_CHARACTER.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def planned_payload(planned: PlannedMessage) -> dict[str, Any]:
    return {
        "kind": planned.kind.value,
        "key": planned.key,
        "customer_id": planned.customer_id,
        "invoice_id": planned.invoice_id,
        "send_at": format_utc(planned.send_at),
        "source": planned.source,
        "data": planned.data,
    }


def planned_from_payload(tenant: str, payload: Mapping[str, Any]) -> PlannedMessage:
    invoice_id = payload.get("invoice_id")
    return PlannedMessage(
        tenant=tenant,
        kind=MessageKind(payload["kind"]),
        key=str(payload["key"]),
        customer_id=str(payload["customer_id"]),
        invoice_id=None if invoice_id is None else str(invoice_id),
        send_at=parse_instant("send_at", str(payload["send_at"])),
        source=str(payload["source"]),
        data=dict(payload.get("data") or {}),
    )


def planned_row(planned: PlannedMessage, *, now: datetime) -> Email:
    """The ledger row of a message not sent yet."""
    return Email(
        tenant=planned.tenant,
        key=planned.key,
        kind=planned.kind.value,
        customer_id=planned.customer_id,
        invoice_id=planned.invoice_id,
        send_at=planned.send_at,
        state=EmailState.PLANNED,
        job_id=email_job_id(planned.tenant, planned.key),
        created_at=now,
        updated_at=now,
    )


def transition_emails(
    messages: MessageStore,
    invoice: Invoice,
    events: Sequence[InvoiceEvent],
    policy: DunningPolicy,
    *,
    now: datetime,
) -> list[NewJob]:
    """The email jobs of a transition's events, their ledger rows planned (inside the
    transition's unit of work); none while the tenant has no SMTP server and sender."""
    if not events:
        return []
    settings = messages.get_message_settings(invoice.tenant)
    if settings is None or not settings.sends:
        return []
    planned = messages_for(invoice, events, policy.messages)
    messages.plan_emails([planned_row(p, now=now) for p in planned])
    return [email_job(p) for p in planned]


__all__ = [
    "EMAIL_HANDLER",
    "EMAIL_RETRY",
    "EMAIL_TIMEOUT",
    "email_job",
    "email_job_id",
    "planned_from_payload",
    "planned_payload",
    "planned_row",
    "transition_emails",
]
