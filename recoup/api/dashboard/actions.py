"""What an operator does by hand from the dashboard, one job or invoice at a time: retry a job
that failed for good, cancel a live one, stop an invoice's dunning, mark it paid. Each goes
through the service the /v1 route of the same operation calls (`Scheduler.redrive`,
`Scheduler.cancel`, `Dunning.stop`, `Dunning.mark_paid`), so the rules are theirs, and, when it
changed something, is recorded as an `OperatorAction` naming who did it (the visitor's token),
which the job's run log and the invoice's timeline show.

An action on something that no longer allows it (a job that ended, an invoice already closed)
changes nothing and records nothing: it is answered `False`, which a bulk action counts as
skipped. A retry the scheduler refuses (a live job holds the name, the ceiling of attempts) is
skipped in the same way, its reason kept for the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from recoup.api.dashboard.web import Visitor
from recoup.api.state import ApiState
from recoup.errors import Conflict
from recoup.jobs.model import JobState
from recoup.tenancy import ActionSubject, OperatorAction


@dataclass(frozen=True, kw_only=True)
class Done:
    """What one action did: `changed` False when there was nothing to do (`why` says why)."""

    changed: bool
    why: str = ""


def _record(
    api: ApiState,
    visitor: Visitor,
    subject: ActionSubject,
    subject_id: str,
    action: str,
    detail: str,
) -> None:
    api.services.tables.record_action(
        OperatorAction(
            tenant=visitor.tenant,
            subject=subject,
            subject_id=subject_id,
            action=action,
            who=visitor.who,
            at=api.clock.now(),
            detail=detail,
        )
    )


def retry_job(api: ApiState, visitor: Visitor, job_id: str, *, detail: str = "") -> Done:
    """Schedule a job that failed for good again now (as POST /v1/jobs/{id}/retry)."""
    try:
        api.scheduler.redrive(job_id, tenant=visitor.tenant)
    except Conflict as refused:
        return Done(changed=False, why=str(refused))
    _record(api, visitor, ActionSubject.JOB, job_id, "retry", detail)
    return Done(changed=True)


def cancel_job(api: ApiState, visitor: Visitor, job_id: str, *, detail: str = "") -> Done:
    """Cancel a live job (as DELETE /v1/jobs/{id}); a job that ended stays as it is."""
    before = api.scheduler.get(job_id, tenant=visitor.tenant)  # NotFound for another tenant's
    if not before.state.is_live:
        return Done(changed=False, why=f"the job is {before.state.value}")
    after = api.scheduler.cancel(job_id, tenant=visitor.tenant)
    if after.state is not JobState.CANCELLED:  # it ended on its own meanwhile
        return Done(changed=False, why=f"the job is {after.state.value}")
    _record(api, visitor, ActionSubject.JOB, job_id, "cancel", detail)
    return Done(changed=True)


def stop_invoice(
    api: ApiState, visitor: Visitor, invoice_id: str, *, reason: str, detail: str = ""
) -> Done:
    """Stop dunning without a payment (as POST /v1/dunning/invoices/{id}/cancel)."""
    before = api.dunning.get(visitor.tenant, invoice_id)
    if before.state.is_final:
        return Done(changed=False, why=f"the invoice is {before.state.value}")
    after = api.dunning.stop(visitor.tenant, invoice_id, reason=reason)
    if after.version == before.version:
        return Done(changed=False, why=f"the invoice is {after.state.value}")
    said = f"reason: {reason}" + (f"; {detail}" if detail else "")
    _record(api, visitor, ActionSubject.INVOICE, invoice_id, "stop", said)
    return Done(changed=True)


def mark_paid(api: ApiState, visitor: Visitor, invoice_id: str, *, detail: str = "") -> Done:
    """Paid out of band: the remaining attempts are cancelled (as POST
    /v1/dunning/invoices/{id}/paid)."""
    before = api.dunning.get(visitor.tenant, invoice_id)
    if before.state.is_final:
        return Done(changed=False, why=f"the invoice is {before.state.value}")
    after = api.dunning.mark_paid(visitor.tenant, invoice_id)
    if after.version == before.version:
        return Done(changed=False, why=f"the invoice is {after.state.value}")
    _record(api, visitor, ActionSubject.INVOICE, invoice_id, "paid", detail)
    return Done(changed=True)


__all__ = ["Done", "cancel_job", "mark_paid", "retry_job", "stop_invoice"]
