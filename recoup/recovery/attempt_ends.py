"""Every invoice ends: an attempt whose job ended without an answer (cancelled by hand, failed
for good once its retries were spent, deleted while pending) is reported `errored`, which the
lifecycle counts as an attempt that did not decline (`recoup.dunning.lifecycle`): the invoice
goes on to its next attempt, or, that attempt being the last, is exhausted with its final action.
Without this an invoice stayed `retrying` for ever with nothing left to run it.

The attempt's own handler never leaves its job this way (it reports before it returns or
fails), and the runtime's own cancellations mark the attempt first, in the same transaction:
what is found here was done to the job from outside. `settle_unanswered` runs in
`Dunning.resync` (at start, before each test-clock step, and on the worker's maintenance
interval, `recoup.recovery.runtime`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recoup.errors import NotFound

if TYPE_CHECKING:
    from recoup.recovery.service import Dunning

# What the attempt's `note.attempt_errored` event says, by how its job ended.
ENDED_WITHOUT_ANSWER = {
    "cancelled": "the attempt's job was cancelled before it answered",
    "failed": "the attempt's job failed for good before it answered (its retries were spent)",
    None: "the attempt's job is gone (deleted) without an answer",
}


def settle_unanswered(dunning: Dunning, *, limit: int = 500) -> int:
    """Report every attempt found by `attempts_ended_unanswered` as `errored`; how many."""
    settled = 0
    for ref in dunning.store.attempts_ended_unanswered(limit=limit):
        detail = ENDED_WITHOUT_ANSWER.get(ref.job_state, ENDED_WITHOUT_ANSWER[None])
        try:
            dunning.report_outcome(
                ref.tenant, ref.invoice_id, ref.attempt.attempt, "errored", detail=detail
            )
        except NotFound:  # the invoice was deleted with its tenant meanwhile
            continue
        settled += 1
    return settled


__all__ = ["ENDED_WITHOUT_ANSWER", "settle_unanswered"]
