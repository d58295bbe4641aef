"""What an operator does by hand from the dashboard, one job or invoice at a time: retry a job
that failed for good, cancel a live one, stop an invoice's dunning, mark it paid. Each is the
API's own operator action (`recoup.api.operator_actions`: the service's operation and its
record naming who did it, the visitor's token, in one transaction), answered as a page needs
it.

An action on something that no longer allows it (a job that ended, an invoice already closed)
changes nothing and records nothing: it is answered `False`, which a bulk action counts as
skipped. A retry the scheduler refuses (a live job holds the name, the ceiling of attempts) is
skipped in the same way, its reason kept for the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from recoup.api import operator_actions as acting
from recoup.api.dashboard.web import Visitor
from recoup.api.state import ApiState
from recoup.dunning.invoice import Invoice
from recoup.errors import Conflict


@dataclass(frozen=True, kw_only=True)
class Done:
    """What one action did: `changed` False when there was nothing to do (`why` says why)."""

    changed: bool
    why: str = ""


def _operator(visitor: Visitor) -> acting.Operator:
    return acting.Operator(tenant=visitor.tenant, who=visitor.who)


def retry_job(api: ApiState, visitor: Visitor, job_id: str, *, detail: str = "") -> Done:
    """Schedule a job that failed for good again now (as POST /v1/jobs/{id}/retry)."""
    try:
        acting.retry_job(api, _operator(visitor), job_id, detail=detail)
    except Conflict as refused:
        return Done(changed=False, why=str(refused))
    return Done(changed=True)


def cancel_job(api: ApiState, visitor: Visitor, job_id: str, *, detail: str = "") -> Done:
    """Cancel a live job (as DELETE /v1/jobs/{id}); a job that ended stays as it is."""
    done = acting.cancel_job(api, _operator(visitor), job_id, detail=detail)
    return Done(
        changed=done.changed, why="" if done.changed else f"the job is {done.value.state.value}"
    )


def stop_invoice(
    api: ApiState, visitor: Visitor, invoice_id: str, *, reason: str, detail: str = ""
) -> Done:
    """Stop dunning without a payment (as POST /v1/dunning/invoices/{id}/cancel)."""
    done = acting.stop_invoice(api, _operator(visitor), invoice_id, reason=reason, detail=detail)
    return _invoice_done(done)


def mark_paid(api: ApiState, visitor: Visitor, invoice_id: str, *, detail: str = "") -> Done:
    """Paid out of band: the remaining attempts are cancelled (as POST
    /v1/dunning/invoices/{id}/paid)."""
    return _invoice_done(acting.mark_paid(api, _operator(visitor), invoice_id, detail=detail))


def _invoice_done(done: acting.Acted[Invoice]) -> Done:
    if done.changed:
        return Done(changed=True)
    return Done(changed=False, why=f"the invoice is {done.value.state.value}")


__all__ = ["Done", "cancel_job", "mark_paid", "retry_job", "stop_invoice"]
