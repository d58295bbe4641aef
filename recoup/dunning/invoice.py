"""The records of an invoice in dunning: the invoice with its attempts, and its events.

An `Invoice` is the whole state the lifecycle (`recoup.dunning.lifecycle`) decides on: the
failure that opened dunning, the state, and every attempt planned so far with its outcome.
Stores keep it as rows (invoice, attempts, events); transitions replace it whole.

    retrying ──attempt succeeded / paid──────────────▶ recovered
        │    ──last attempt failed / hard decline────▶ exhausted
        │    ──decline that needs the customer───────▶ awaiting_customer
    awaiting_customer ──payment method updated──▶ retrying (one prompt attempt)
    awaiting_customer | exhausted ──paid──▶ recovered
    retrying | awaiting_customer ──dunning stopped (subscription cancelled, invoice voided
        or written off, an operator's stop, the charge side closed it)──▶ cancelled

`cancelled` is final and is not a recovery: nothing is charged for it again, and recovery
rates leave it out (only recovered and exhausted invoices are judged).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from recoup.dunning.attempt_timing import AttemptTiming
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import require_aware

# Namespace of the deterministic ids of attempt jobs and events (uuid5): the same invoice,
# attempt or event always gets the same id, so a duplicate trigger rebuilds the same job.
# An invoice's id: RFC 3986's unreserved characters, the first a letter or a
# digit, so that it is one URL path segment as it is (no `/`, which no route can carry even as
# `%2F`; no `.` or `..` alone, which clients normalise away) and sits in the names, keys and
# groups of its jobs (`dunning-retry-{invoice}-{n}`, `retry:{invoice}:{n}`) and in the
# dashboard's links without escaping. An invoice number such as `2026/0042` is sent as
# `2026-0042` (or kept in the caller's own records beside it).
MAX_INVOICE_ID_LENGTH = 100
INVOICE_ID_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._~-]{{0,{MAX_INVOICE_ID_LENGTH - 1}}}$"
INVOICE_ID_RULE = (
    f"expected 1–{MAX_INVOICE_ID_LENGTH} characters of A–Z, a–z, 0–9, '-', '.', '_', '~', "
    "starting with a letter or a digit (no '/': send 2026/0042 as 2026-0042)"
)
_INVOICE_ID = re.compile(INVOICE_ID_PATTERN)


def check_invoice_id(value: str, *, field: str = "invoice_id") -> str:
    """`InvalidInput` naming `field` unless `value` is of the id alphabet (`INVOICE_ID_RULE`)."""
    if not isinstance(value, str) or not _INVOICE_ID.fullmatch(value):
        raise InvalidInput(field, value, INVOICE_ID_RULE)
    return value


ID_NAMESPACE = uuid.UUID("5d1e3c2a-7f0b-4c55-9a43-2f6f0a7d9b11")


class InvoiceState(StrEnum):
    RETRYING = "retrying"
    AWAITING_CUSTOMER = "awaiting_customer"
    RECOVERED = "recovered"
    EXHAUSTED = "exhausted"
    CANCELLED = "cancelled"  # dunning stopped without a payment

    @property
    def is_final(self) -> bool:
        return self in (InvoiceState.RECOVERED, InvoiceState.EXHAUSTED, InvoiceState.CANCELLED)

    @property
    def is_judged(self) -> bool:
        """Counted in recovery rates: dunning ran to its end (recovered or exhausted), not
        stopped from outside."""
        return self in (InvoiceState.RECOVERED, InvoiceState.EXHAUSTED)


class AttemptState(StrEnum):
    SCHEDULED = "scheduled"  # its job will ask the charge endpoint at `at`
    PENDING = "pending"  # the provider's answer was ambiguous: asked again with the same keys
    AWAITING_REPORT = "awaiting_report"  # the endpoint accepted it (202): outcome comes later
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # declined
    CANCELLED = "cancelled"  # not needed any more (paid, recovered, hard decline, re-plan)
    ERRORED = "errored"  # the endpoint refused the request itself (a 4xx): not a decline

    @property
    def is_open(self) -> bool:
        """Still to be asked, or asked without a final answer."""
        return self in (
            AttemptState.SCHEDULED,
            AttemptState.PENDING,
            AttemptState.AWAITING_REPORT,
        )


def attempt_job_id(tenant: str, invoice_id: str, attempt: int) -> str:
    """The id of the job that runs an attempt: deterministic, so recreating it is a no-op."""
    return str(uuid.uuid5(ID_NAMESPACE, f"attempt\x00{tenant}\x00{invoice_id}\x00{attempt}"))


def event_id(tenant: str, invoice_id: str, seq: int) -> str:
    """The id of an invoice's `seq`-th event: its Standard Webhooks `webhook-id` too."""
    return str(uuid.uuid5(ID_NAMESPACE, f"event\x00{tenant}\x00{invoice_id}\x00{seq}"))


def job_group(invoice_id: str) -> str:
    """The job group of an invoice's attempts: listed and cancelled exactly, by equality."""
    return f"dunning:{invoice_id}"


@dataclass(frozen=True, kw_only=True)
class AttemptRecord:
    attempt: int  # 1-based, never reused within an invoice
    at: datetime  # the instant it is (or was) due
    state: AttemptState
    job_id: str
    decline_code: str | None = None
    advice_code: str | None = None
    reported_at: datetime | None = None  # when its final outcome arrived
    timing: AttemptTiming | None = None  # how an adaptive policy placed it (None: static)

    def __post_init__(self) -> None:
        require_aware("at", self.at)
        if self.reported_at is not None:
            require_aware("reported_at", self.reported_at)
        if self.attempt < 1:
            raise InvalidInput("attempt", self.attempt, "expected ≥ 1")


@dataclass(frozen=True, kw_only=True)
class Invoice:
    tenant: str
    invoice_id: str
    customer_id: str
    amount: int  # minor units
    currency: str
    failed_at: datetime  # the failure that opened dunning
    timezone: str
    country: str | None
    decline_code: str | None
    advice_code: str | None
    card_fingerprint: str | None
    card_network: str | None
    gateway: str | None
    merchant_id: str | None
    charge_url: str
    policy: str  # the policy's name, as planned with
    state: InvoiceState
    decision: str  # the first decision: retry | no_retry | await_customer
    reason: str  # why the invoice is in its state (the latest decision's reason)
    final_action: str  # pause_access | cancel | mark_uncollectible | leave_past_due
    attempts: tuple[AttemptRecord, ...]
    created_at: datetime
    updated_at: datetime
    recovered_by: str | None = None  # "attempt:{n}", "paid_out_of_band" or "charge_endpoint"
    version: int = 0  # bumped by every transition

    def __post_init__(self) -> None:
        for name in ("failed_at", "created_at", "updated_at"):
            require_aware(name, getattr(self, name))
        numbers = [a.attempt for a in self.attempts]
        if numbers != sorted(set(numbers)):
            raise InvalidInput("attempts", numbers, "expected strictly increasing numbers")

    def attempt(self, n: int) -> AttemptRecord | None:
        for a in self.attempts:
            if a.attempt == n:
                return a
        return None


@dataclass(frozen=True, kw_only=True)
class InvoiceEvent:
    """Something that happened to an invoice, in order (`seq` from 1). `type` is an event
    type sent to the tenant (`invoice.*`, and `customer.access_changed` when the invoice
    changed its customer's access) or a timeline-only note (`note.*`)."""

    id: str
    tenant: str
    invoice_id: str
    seq: int
    type: str
    at: datetime
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require_aware("at", self.at)

    @property
    def is_sent(self) -> bool:
        """Sent to the tenant's event URL (every type but the `note.*` ones)."""
        return not self.type.startswith("note.")


__all__ = [
    "ID_NAMESPACE",
    "AttemptRecord",
    "AttemptState",
    "Invoice",
    "InvoiceEvent",
    "InvoiceState",
    "attempt_job_id",
    "event_id",
    "job_group",
]
