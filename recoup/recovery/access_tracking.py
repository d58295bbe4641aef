"""Following a customer's access state (`recoup.dunning.access`) as their invoices change: the
shell around the pure rule, run inside the unit of work of each transition.

For a transition of one of the customer's invoices, `AccessTracker.follow` (called under the
invoice's row lock, before the invoice is written):
1. locks the customer's row (created if Recoup did not know them), so two invoices of one
   customer changing at once decide the customer's access one after the other;
2. reads the customer's other invoices in dunning and puts the invoice as the transition
   leaves it among them, and computes the access at the transition's instant;
3. writes `access` into every event of the transition, and when the access changed records it
   on the customer's row and adds a `customer.access_changed` event to the invoice (sent to
   the tenant's event URL with the invoice's events, in its timeline);
4. when a grace period ends later while its invoice is still open, schedules the job that
   looks again at that instant (`access_job`: a deterministic id, so scheduling it twice
   is one job), created through `Scheduler.insert_many_checked`, the one path every job
   takes. That job (`AccessTracker.recheck`, through `Dunning.recheck_access`) changes
   nothing of the invoice but the event it may add.

Writing all of it in the transition's unit of work keeps the customer's access, the events
that announce it and the job that will change it next as one with the invoice's state.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from recoup.dunning.access import Access, Standing, customer_access, next_change
from recoup.dunning.invoice import ID_NAMESPACE, Invoice, InvoiceEvent, event_id, job_group
from recoup.dunning.messages import Transition
from recoup.jobs.model import BackoffPolicy, NewJob, PythonTarget
from recoup.jobs.scheduler import Scheduler
from recoup.recovery.customer_store import CustomerInvoice, CustomerStore
from recoup.recovery.job_specs import KEEP_JOBS_FOR
from recoup.recovery.policies import TenantPolicies
from recoup.timekeeping.instants import format_utc

ACCESS_HANDLER = "recoup.dunning.access"
ACCESS_CHANGED = "customer.access_changed"
ACCESS_RETRY = BackoffPolicy(
    max_attempts=20, min_backoff=timedelta(seconds=10), max_backoff=timedelta(hours=1)
)


def access_job_id(tenant: str, customer_id: str, at: datetime) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, f"access\x00{tenant}\x00{customer_id}\x00{format_utc(at)}"))


def access_job(tenant: str, customer_id: str, invoice_id: str, at: datetime) -> NewJob:
    """The job that looks at the customer's access again at `at`, when the grace period of
    `invoice_id` ends."""
    return NewJob(
        id=access_job_id(tenant, customer_id, at),
        run_at=at,
        target=PythonTarget(handler=ACCESS_HANDLER),
        tenant=tenant,
        # The invoice's group: ordered with its attempts (a test clock runs one job of a group
        # at a time, in order), so the grace ends after every attempt due before it.
        group=job_group(invoice_id),
        payload={"customer_id": customer_id, "invoice_id": invoice_id},
        idempotency_key=f"access:{customer_id}:{format_utc(at)}",
        retry=ACCESS_RETRY,
        keep_for=KEEP_JOBS_FOR,
    )


class AccessStore(Protocol):
    """What following access needs of the store: the customers' tables (its jobs go through
    the scheduler)."""

    @property
    def customers(self) -> CustomerStore: ...


class AccessTracker:
    """The access of the customers of every tenant, over `store`, its jobs created through
    `scheduler`; `policies(tenant)` gives a tenant's policies (each invoice's grace period is
    its own policy's)."""

    def __init__(
        self,
        scheduler: Scheduler,
        store: AccessStore,
        policies: Callable[[str], TenantPolicies],
    ) -> None:
        self.scheduler = scheduler
        self.store = store
        self.policies = policies

    def follow(
        self,
        t: Transition,
        *,
        seq: int,
        now: datetime,
        policies: TenantPolicies | None = None,
    ) -> Transition:
        """The transition with the customer's access in its events, and a
        `customer.access_changed` event when it changes it; the customer's row and the next
        timed change written (the module docstring, steps 1–4). `seq`: the invoice's events
        before the transition; `policies`: the tenant's, when the caller has read them (else
        read here). Call it inside the unit of work that writes the transition."""
        invoice = t.invoice
        previous, access = self._decide(invoice, now=now, policies=policies)
        events = [_with_access(e, access) for e in t.events]
        if access is not previous:
            last = max((e.seq for e in t.events), default=seq)
            events.append(_changed_event(invoice, last + 1, previous, access, at=now))
        return replace(t, events=tuple(events))

    def recheck(
        self,
        invoice: Invoice,
        *,
        seq: int,
        now: datetime,
        policies: TenantPolicies | None = None,
    ) -> InvoiceEvent | None:
        """At a grace period's end: the `customer.access_changed` event to add to `invoice`
        (the one whose grace ended; `seq` its events so far) if the customer's access changed,
        else None. The customer's row and the next timed change are written as by `follow`."""
        previous, access = self._decide(invoice, now=now, policies=policies)
        if access is previous:
            return None
        return _changed_event(invoice, seq + 1, previous, access, at=now)

    def _decide(
        self, invoice: Invoice, *, now: datetime, policies: TenantPolicies | None
    ) -> tuple[Access, Access]:
        """(the customer's access before, after) `invoice` as it is now; what changed is
        written."""
        customers = self.store.customers
        tenant, customer_id = invoice.tenant, invoice.customer_id
        before = customers.lock_customer(tenant, customer_id, at=now)
        others = [
            c
            for c in customers.customer_invoices(tenant, customer_id)
            if c.invoice_id != invoice.invoice_id
        ]
        standings = self._standings(tenant, [*others, _brief(invoice)], policies)
        access = customer_access(standings, now=now)
        if access is not before.access:
            customers.set_access(tenant, customer_id, access, at=now)
        timed = next_change(standings, now=now)
        if timed is not None:
            at, whose = timed
            # Inside the transition's unit of work: its target is a handler, nothing to resolve.
            job = access_job(tenant, customer_id, whose, at)
            self.scheduler.insert_many_checked([job], now=now)
        return before.access, access

    def _standings(
        self,
        tenant: str,
        invoices: Sequence[CustomerInvoice],
        policies: TenantPolicies | None,
    ) -> list[Standing]:
        if policies is None and invoices:
            policies = self.policies(tenant)
        return [
            Standing(
                invoice_id=c.invoice_id,
                state=c.state,
                final_action=c.final_action,
                failed_at=c.failed_at,
                grace=policies.for_invoice(c.policy).access.grace if policies else timedelta(0),
            )
            for c in invoices
        ]


def _brief(invoice: Invoice) -> CustomerInvoice:
    return CustomerInvoice(
        invoice_id=invoice.invoice_id,
        state=invoice.state,
        final_action=invoice.final_action,
        failed_at=invoice.failed_at,
        policy=invoice.policy,
    )


def _with_access(event: InvoiceEvent, access: Access) -> InvoiceEvent:
    return replace(event, data={**event.data, "access": access.value})


def _changed_event(
    invoice: Invoice, seq: int, previous: Access, access: Access, *, at: datetime
) -> InvoiceEvent:
    data: dict[str, Any] = {
        "invoice_id": invoice.invoice_id,
        "customer_id": invoice.customer_id,
        "access": access.value,
        "previous_access": previous.value,
        "invoice_state": invoice.state.value,
    }
    return InvoiceEvent(
        id=event_id(invoice.tenant, invoice.invoice_id, seq),
        tenant=invoice.tenant,
        invoice_id=invoice.invoice_id,
        seq=seq,
        type=ACCESS_CHANGED,
        at=at,
        data=data,
    )


__all__ = [
    "ACCESS_CHANGED",
    "ACCESS_HANDLER",
    "AccessStore",
    "AccessTracker",
    "access_job",
    "access_job_id",
]
