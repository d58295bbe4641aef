"""Hand-built invoices for the recovery analytics tests: only what a test says differs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from recoup.dunning.invoice import AttemptRecord, AttemptState, Invoice, InvoiceState

T0 = datetime(2026, 6, 1, 12, tzinfo=UTC)  # a Monday
NOW = datetime(2026, 7, 1, tzinfo=UTC)

# (hours after the failure, outcome, decline code of a failed attempt)
Step = tuple[float, str, str | None]


def invoice(
    invoice_id: str,
    steps: list[Step] | None = None,
    *,
    failed_at: datetime = T0,
    state: str | None = None,
    recovered_by: str | None = None,
    **fields: Any,
) -> Invoice:
    """An invoice whose attempts follow `steps`; its state follows them unless given: recovered
    by the succeeded attempt, else exhausted."""
    steps = [] if steps is None else steps
    attempts = tuple(
        AttemptRecord(
            attempt=n,
            at=failed_at + timedelta(hours=hours),
            state=AttemptState(outcome),
            job_id=f"job-{invoice_id}-{n}",
            decline_code=code,
        )
        for n, (hours, outcome, code) in enumerate(steps, start=1)
    )
    won = [a.attempt for a in attempts if a.state is AttemptState.SUCCEEDED]
    if state is None:
        state = "recovered" if won or recovered_by else "exhausted"
    if recovered_by is None and won:
        recovered_by = f"attempt:{won[0]}"
    values: dict[str, Any] = {
        "tenant": "acme",
        "invoice_id": invoice_id,
        "customer_id": f"cus-{invoice_id}",
        "amount": 1000,
        "currency": "usd",
        "failed_at": failed_at,
        "timezone": "UTC",
        "country": None,
        "decline_code": "insufficient_funds",
        "advice_code": None,
        "card_fingerprint": None,
        "card_network": None,
        "gateway": "gw-a",
        "merchant_id": "m-1",
        "charge_url": "https://billing.example/charge",
        "policy": "business-days",
        "state": InvoiceState(state),
        "decision": "retry",
        "reason": "test",
        "final_action": "leave_past_due",
        "attempts": attempts,
        "created_at": failed_at,
        "updated_at": failed_at,
        "recovered_by": recovered_by,
    }
    values.update(fields)
    return Invoice(**values)
