"""The jobs the dunning runtime creates, as values: an attempt, a deadline, an event. Each has
a deterministic id and idempotency key, so creating it twice (a retry, a resync) is a no-op."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from recoup.dunning.invoice import ID_NAMESPACE, Invoice, InvoiceEvent, job_group
from recoup.dunning.outcomes import idempotency_key, job_name
from recoup.dunning.policy_flow import FlowLimit
from recoup.jobs.model import BackoffPolicy, HttpTarget, NewJob, PythonTarget
from recoup.timekeeping.instants import format_utc

ATTEMPT_HANDLER = "recoup.dunning.attempt"
DEADLINE_HANDLER = "recoup.dunning.deadline"
FINAL_ACTION_HANDLER = "recoup.dunning.final_action"  # taken at the provider (Stripe)
# An attempt job is retried (same attempt, same keys) on transport failures and while the
# provider's answer is pending; backoff from a minute up to six hours, for about three days.
ATTEMPT_RETRY = BackoffPolicy(
    max_attempts=20, min_backoff=timedelta(minutes=1), max_backoff=timedelta(hours=6)
)
ATTEMPT_TIMEOUT = timedelta(seconds=60)  # the charge endpoint talks to the provider
EVENT_RETRY = BackoffPolicy(
    max_attempts=12, min_backoff=timedelta(seconds=30), max_backoff=timedelta(hours=2)
)
EVENT_TIMEOUT = timedelta(seconds=15)
KEEP_JOBS_FOR = timedelta(days=30)  # the timeline links to their run logs


def deadline_job_id(tenant: str, invoice_id: str, at: datetime) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, f"deadline\x00{tenant}\x00{invoice_id}\x00{at}"))


def attempt_job(invoice: Invoice, n: int, *, flow: FlowLimit | None = None) -> NewJob:
    """The job of attempt `n` (which the invoice must have): a Python handler that asks the
    charge endpoint at the attempt's instant; with the policy's `flow`, limited per gateway or
    merchant by the jobs' flow control."""
    record = invoice.attempt(n)
    if record is None:
        raise ValueError(f"invoice {invoice.invoice_id!r} has no attempt {n}")
    return NewJob(
        id=record.job_id,
        run_at=record.at,
        target=PythonTarget(handler=ATTEMPT_HANDLER),
        tenant=invoice.tenant,
        name=job_name(invoice.invoice_id, n),
        group=job_group(invoice.invoice_id),
        payload={"invoice_id": invoice.invoice_id, "attempt": n},
        idempotency_key=idempotency_key(invoice.invoice_id, n),
        retry=ATTEMPT_RETRY,
        timeout=ATTEMPT_TIMEOUT,
        keep_for=KEEP_JOBS_FOR,
        **_flow_fields(invoice, flow),
    )


def _flow_fields(invoice: Invoice, flow: FlowLimit | None) -> dict[str, Any]:
    if flow is None:
        return {}
    return {
        "flow_key": flow.key_for(invoice.gateway, invoice.merchant_id),
        "flow_rate": flow.rate,
        "flow_period": timedelta(seconds=flow.period_seconds),
        "flow_parallelism": flow.parallelism,
    }


# The final actions Recoup takes at Stripe for an invoice it charges there, and the one it
# undoes when such an invoice is recovered after all (access paused → resumed).
PROVIDER_ACTIONS = ("mark_uncollectible", "cancel", "pause_access", "resume_access")
FINAL_ACTION_RETRY = BackoffPolicy(
    max_attempts=20, min_backoff=timedelta(seconds=10), max_backoff=timedelta(hours=1)
)


def final_action_job(invoice: Invoice, action: str, *, at: datetime) -> NewJob:
    """The job that takes `action` at the provider for the invoice, once: its id and key are
    the invoice's and the action's, so a transition carried out twice makes one job."""
    if action not in PROVIDER_ACTIONS:
        raise ValueError(f"no provider action {action!r}; expected one of {PROVIDER_ACTIONS}")
    key = f"final:{invoice.invoice_id}:{action}"
    return NewJob(
        id=str(uuid.uuid5(ID_NAMESPACE, f"final\x00{invoice.tenant}\x00{key}")),
        run_at=at,
        target=PythonTarget(handler=FINAL_ACTION_HANDLER),
        tenant=invoice.tenant,
        name=f"dunning-{action.replace('_', '-')}-{invoice.invoice_id}",
        group=job_group(invoice.invoice_id),
        payload={"invoice_id": invoice.invoice_id, "action": action},
        idempotency_key=key,
        retry=FINAL_ACTION_RETRY,
        timeout=ATTEMPT_TIMEOUT,
        keep_for=KEEP_JOBS_FOR,
    )


NAME_MAX = 200  # a job name's longest (`NewJob`)


def deadline_job(invoice: Invoice, at: datetime) -> NewJob:
    """The job that ends the wait for a customer at `at`."""
    return NewJob(
        id=deadline_job_id(invoice.tenant, invoice.invoice_id, at),
        run_at=at,
        target=PythonTarget(handler=DEADLINE_HANDLER),
        tenant=invoice.tenant,
        name=_bounded_name(f"dunning-deadline-{invoice.invoice_id}"),
        group=job_group(invoice.invoice_id),
        payload={"invoice_id": invoice.invoice_id},
        idempotency_key=f"deadline:{invoice.invoice_id}:{format_utc(at)}",
        retry=ATTEMPT_RETRY,
        keep_for=KEEP_JOBS_FOR,
    )


def _bounded_name(name: str) -> str:
    return name[:NAME_MAX]


def event_job_name(event: InvoiceEvent) -> str:
    """`event-{type}-{invoice}-{seq}`: what a delivery is, readable in a log line and a list;
    the event's number keeps it apart from another event of the same type (a customer's
    access changes several times in one invoice), since live jobs' names are unique."""
    return _bounded_name(f"event-{event.type}-{event.invoice_id}-{event.seq}")


def event_job(event: InvoiceEvent, url: str, *, now: datetime) -> NewJob:
    """The signed delivery of `event` to `url`. The job's id is the event's, so the receiver
    sees one `webhook-id` per event, on every retry."""
    # Events of one invoice due at one instant may arrive in any order (delivery is concurrent,
    # and retried): `seq` orders them.
    body = {
        "id": event.id,
        "seq": event.seq,
        "type": event.type,
        "timestamp": format_utc(event.at),
        "data": event.data,
    }
    return NewJob(
        id=event.id,
        run_at=now,
        target=HttpTarget(url=url, body=body),
        tenant=event.tenant,
        name=event_job_name(event),
        group=job_group(event.invoice_id),
        idempotency_key=f"event:{event.id}",
        retry=EVENT_RETRY,
        timeout=EVENT_TIMEOUT,
        keep_for=KEEP_JOBS_FOR,
    )


__all__ = [
    "ATTEMPT_HANDLER",
    "ATTEMPT_RETRY",
    "ATTEMPT_TIMEOUT",
    "DEADLINE_HANDLER",
    "EVENT_RETRY",
    "EVENT_TIMEOUT",
    "KEEP_JOBS_FOR",
    "attempt_job",
    "deadline_job",
    "deadline_job_id",
    "event_job",
    "event_job_name",
]
