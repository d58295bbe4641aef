"""Redoing what a crash between a transition and its jobs left undone (`resync`): run at
start, before each test-clock step and on the worker's maintenance interval
(`recoup.recovery.runtime`), from any process, at any time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recoup.dunning.invoice import AttemptState
from recoup.recovery.attempt_ends import settle_unanswered
from recoup.recovery.job_specs import attempt_job

if TYPE_CHECKING:
    from recoup.recovery.service import Dunning


def resync(dunning: Dunning, *, limit: int = 500) -> int:
    """Redo what a crash between a transition and its jobs left undone: events not yet
    dispatched, attempts scheduled without their job, cancelled attempts whose job is
    live; and report as errored the open attempts whose job ended without an answer
    (`recoup.recovery.attempt_ends`). Returns how many things it fixed. Safe to run at
    any time, from any process."""
    fixed = 0
    now = dunning.clock.now()
    events = dunning.store.undispatched_events(limit=limit)
    dunning.jobs.dispatch(events, now=now)
    fixed += len(events)
    for ref in dunning.store.attempts_out_of_sync(limit=limit):
        invoice = dunning.store.get_invoice(ref.tenant, ref.invoice_id)
        if invoice is None:
            continue
        if ref.attempt.state is AttemptState.SCHEDULED:
            # The same flow key and limits as at its first creation
            # (`TransitionJobs.carry_out`): the invoice's policy, per gateway or merchant.
            flow = dunning.policies(invoice.tenant).for_invoice(invoice.policy).flow
            job = attempt_job(invoice, ref.attempt.attempt, flow=flow)
            dunning.scheduler.insert_many_checked([job], now=now)
        else:
            dunning.store.cancel(ref.tenant, ref.attempt.job_id, now=now, begun=False)
        fixed += 1
    # Attempts whose job was ended from outside move their invoice on (every invoice ends).
    return fixed + settle_unanswered(dunning, limit=limit)


__all__ = ["resync"]
