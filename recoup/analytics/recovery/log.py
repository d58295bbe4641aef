"""The attempt log: one row per attempt of every invoice, with every input of the attempt.

The local hour and weekday are read in the customer's zone (`recoup.timekeeping.zones`), the
decline category comes from the dunning taxonomy (`recoup.dunning.taxonomy`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime

from recoup.dunning.invoice import Invoice
from recoup.dunning.taxonomy import DeclineClass, classify
from recoup.timekeeping.zones import to_local

# The taxonomy's classes under the names the report uses.
CATEGORY = {
    DeclineClass.SOFT: "soft",
    DeclineClass.NEVER: "hard",
    DeclineClass.CUSTOMER_ACTION: "customer",
    DeclineClass.NOT_APPLICABLE: "hard",  # an advice class: never retried either way
}


@functools.lru_cache(maxsize=4096)
def decline_category(decline_code: str | None, advice_code: str | None) -> str | None:
    """soft | hard | customer for a decline's codes; None when there is no code at all."""
    if not decline_code and not advice_code:
        return None
    advice = (advice_code,) if advice_code else ()
    return CATEGORY[classify(decline_code, advice).decline_class]


def failure_category(invoice: Invoice) -> str:
    """The category of the failure that opened dunning (no code at all is soft, as the
    planner treats it)."""
    return decline_category(invoice.decline_code, invoice.advice_code) or "soft"


def cohort(invoice: Invoice) -> date:
    """The invoice's billing cohort: the local date, in the customer's zone, of its failure."""
    return to_local(invoice.failed_at, invoice.timezone).date()


@dataclass(frozen=True, kw_only=True)
class AttemptLogEntry:
    """One attempt with every input it was made with (ANALYTICS_API.md)."""

    tenant: str
    invoice_id: str
    customer_id: str
    attempt: int
    at: datetime  # UTC instant it was due / ran
    timezone: str
    local_hour: int  # 0–23 in the customer's zone
    weekday: int  # 0 = Monday, in the customer's zone
    outcome: str  # an AttemptState value
    decline_code: str | None  # of this attempt's decline
    advice_code: str | None
    failure_decline_code: str | None  # of the failure that opened dunning
    decline_category: str | None  # soft | hard | customer, of this attempt's decline
    gateway: str | None
    merchant_id: str | None
    policy: str
    amount: int
    currency: str
    cohort: date  # local date of the invoice's failed_at
    failure_category: str = "soft"  # soft | hard | customer, of the failure that opened dunning
    invoice_state: str = ""  # the invoice's state when the log was read


def attempt_log(invoices: Iterable[Invoice]) -> list[AttemptLogEntry]:
    """Every attempt of every invoice (scheduled and cancelled ones too), by invoice then
    attempt number."""
    rows: list[AttemptLogEntry] = []
    for invoice in invoices:
        billing = cohort(invoice)
        opened_by = failure_category(invoice)
        for a in invoice.attempts:
            local = to_local(a.at, invoice.timezone)
            rows.append(
                AttemptLogEntry(
                    tenant=invoice.tenant,
                    invoice_id=invoice.invoice_id,
                    customer_id=invoice.customer_id,
                    attempt=a.attempt,
                    at=a.at,
                    timezone=invoice.timezone,
                    local_hour=local.hour,
                    weekday=local.weekday(),
                    outcome=a.state.value,
                    decline_code=a.decline_code,
                    advice_code=a.advice_code,
                    failure_decline_code=invoice.decline_code,
                    decline_category=decline_category(a.decline_code, a.advice_code),
                    gateway=invoice.gateway,
                    merchant_id=invoice.merchant_id,
                    policy=invoice.policy,
                    amount=invoice.amount,
                    currency=invoice.currency,
                    cohort=billing,
                    failure_category=opened_by,
                    invoice_state=invoice.state.value,
                )
            )
    return rows


__all__ = [
    "CATEGORY",
    "AttemptLogEntry",
    "attempt_log",
    "cohort",
    "decline_category",
    "failure_category",
]
