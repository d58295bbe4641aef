"""What a person does by hand to one job or invoice, through the API or the dashboard: retry a
job that failed for good, cancel a live one, stop an invoice's dunning, mark it paid. Each is
the service's own operation (`Scheduler.redrive`, `Scheduler.cancel`, `Dunning.stop`,
`Dunning.mark_paid`, so the rules are theirs) and, when it changed something, an
`OperatorAction` naming who did it (the token's label, else its prefix), which the job's run
log and the invoice's timeline show.

The change and its record are one unit of work (`store.atomically`; the API's tables share the
store's database and its transaction): a crash or a failed write leaves both or neither, never
a change nobody did or a record of a change that did not happen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from recoup.api.state import ApiState
from recoup.dunning.invoice import Invoice
from recoup.jobs.model import Job, JobState
from recoup.tenancy import ActionSubject, OperatorAction

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Operator:
    """Who acts, for which tenant: `who` as the run log names them (never a secret)."""

    tenant: str
    who: str


@dataclass(frozen=True, kw_only=True)
class Acted(Generic[T]):
    """The job or invoice after the action, and whether the action changed it (False: there
    was nothing to do, and nothing was recorded)."""

    value: T
    changed: bool


def _record(
    api: ApiState, by: Operator, subject: ActionSubject, subject_id: str, action: str, detail: str
) -> None:
    api.services.tables.record_action(
        OperatorAction(
            tenant=by.tenant,
            subject=subject,
            subject_id=subject_id,
            action=action,
            who=by.who,
            at=api.clock.now(),
            detail=detail,
        )
    )


def _at_once(api: ApiState, unit: Callable[[], T]) -> T:
    return api.dunning.store.atomically(unit)


def retry_job(api: ApiState, by: Operator, job_id: str, *, detail: str = "") -> Job:
    """Schedule a job that failed for good again now; `Conflict` (nothing changed, nothing
    recorded) when the scheduler refuses it, `NotFound` for an unknown job."""

    def unit() -> Job:
        redriven = api.scheduler.redrive(job_id, tenant=by.tenant)
        _record(api, by, ActionSubject.JOB, job_id, "retry", detail)
        return redriven

    return _at_once(api, unit)


def cancel_job(api: ApiState, by: Operator, job_id: str, *, detail: str = "") -> Acted[Job]:
    """Cancel a live job; a job that ended is answered as it is (unchanged, unrecorded)."""

    def unit() -> Acted[Job]:
        before = api.scheduler.get(job_id, tenant=by.tenant)  # NotFound for another tenant's
        after = api.scheduler.cancel(job_id, tenant=by.tenant)
        changed = before.state.is_live and after.state is JobState.CANCELLED
        if changed:
            _record(api, by, ActionSubject.JOB, job_id, "cancel", detail)
        return Acted(value=after, changed=changed)

    return _at_once(api, unit)


def stop_invoice(
    api: ApiState, by: Operator, invoice_id: str, *, reason: str, detail: str = ""
) -> Acted[Invoice]:
    """Stop dunning without a payment; an invoice already closed is answered as it is."""
    said = f"reason: {reason}" + (f"; {detail}" if detail else "")
    return _transition(
        api,
        by,
        invoice_id,
        "stop",
        said,
        lambda: api.dunning.stop(by.tenant, invoice_id, reason=reason),
    )


def mark_paid(api: ApiState, by: Operator, invoice_id: str, *, detail: str = "") -> Acted[Invoice]:
    """Paid out of band: the remaining attempts are cancelled; an invoice already closed is
    answered as it is."""
    return _transition(
        api, by, invoice_id, "paid", detail, lambda: api.dunning.mark_paid(by.tenant, invoice_id)
    )


def _transition(
    api: ApiState,
    by: Operator,
    invoice_id: str,
    action: str,
    detail: str,
    change: Callable[[], Invoice],
) -> Acted[Invoice]:
    """`change` and, when it moved the invoice on (a new version), its record, at once."""

    def unit() -> Acted[Invoice]:
        before = api.dunning.get(by.tenant, invoice_id)
        if before.state.is_final:
            return Acted(value=before, changed=False)
        after = change()
        changed = after.version != before.version
        if changed:
            _record(api, by, ActionSubject.INVOICE, invoice_id, action, detail)
        return Acted(value=after, changed=changed)

    return _at_once(api, unit)


__all__ = ["Acted", "Operator", "cancel_job", "mark_paid", "retry_job", "stop_invoice"]
