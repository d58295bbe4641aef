"""The final actions of a dunning run at Stripe (`mark_uncollectible`, `cancel_subscription`,
`pause_collection`, `resume_collection`): each reads the object first and acts only when
needed, so each is idempotent whatever became of Stripe's key: done already →
`ALREADY_DONE`. Stripe's refusals are `REFUSED` and transport failures `FAILED` (`retry`
true); none raises. Through the connection of `stripe_calls.StripeCalls`: no SDK here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from recoup.payments.stripe_answers import ActionOutcome, FinalActionResult
from recoup.payments.stripe_calls import Answer, StripeCalls
from recoup.payments.stripe_reading import ENDED_SUBSCRIPTIONS, as_map, subscription_ended, text


class StripeFinalActions:
    """The final actions on one Stripe account's invoices and subscriptions, through `calls`."""

    def __init__(self, calls: StripeCalls) -> None:
        self._calls = calls

    def mark_uncollectible(self, invoice_id: str, *, idempotency_key: str) -> FinalActionResult:
        """Write the invoice off (`POST /v1/invoices/{id}/mark_uncollectible`). Already
        uncollectible → `ALREADY_DONE`; paid or void → `REFUSED`."""
        return self._final(
            "mark_uncollectible",
            invoice_id,
            read=lambda: self._calls.v1.invoices.retrieve(invoice_id),
            act=lambda: self._calls.v1.invoices.mark_uncollectible(
                invoice_id, options={"idempotency_key": idempotency_key}
            ),
            done=lambda inv: inv.get("status") == "uncollectible",
            refused=lambda inv: (
                f"the invoice is {inv.get('status')}"
                if inv.get("status") in ("paid", "void")
                else None
            ),
        )

    def cancel_subscription(
        self, subscription_id: str, *, idempotency_key: str
    ) -> FinalActionResult:
        """Cancel the subscription now (`DELETE /v1/subscriptions/{id}`). Already canceled
        (or expired incomplete) → `ALREADY_DONE`."""
        return self._final(
            "cancel_subscription",
            subscription_id,
            read=lambda: self._calls.v1.subscriptions.retrieve(subscription_id),
            act=lambda: self._calls.v1.subscriptions.cancel(
                subscription_id, options={"idempotency_key": idempotency_key}
            ),
            done=lambda sub: sub.get("status") in ENDED_SUBSCRIPTIONS,
            refused=lambda sub: None,
        )

    def pause_collection(self, subscription_id: str, *, idempotency_key: str) -> FinalActionResult:
        """Pause the subscription's collection, its invoices kept as drafts
        (`pause_collection[behavior]=keep_as_draft`). Paused so already → `ALREADY_DONE`; an
        ended subscription → `REFUSED`."""
        return self._final(
            "pause_collection",
            subscription_id,
            read=lambda: self._calls.v1.subscriptions.retrieve(subscription_id),
            act=lambda: self._calls.v1.subscriptions.update(
                subscription_id,
                {"pause_collection": {"behavior": "keep_as_draft"}},
                options={"idempotency_key": idempotency_key},
            ),
            done=lambda sub: as_map(sub.get("pause_collection")).get("behavior") == "keep_as_draft",
            refused=subscription_ended,
        )

    def resume_collection(self, subscription_id: str, *, idempotency_key: str) -> FinalActionResult:
        """Resume the subscription's collection (`pause_collection=""` clears the pause). Not
        paused → `ALREADY_DONE`; an ended subscription → `REFUSED`."""
        return self._final(
            "resume_collection",
            subscription_id,
            read=lambda: self._calls.v1.subscriptions.retrieve(subscription_id),
            act=lambda: self._calls.v1.subscriptions.update(
                subscription_id,
                {"pause_collection": ""},
                options={"idempotency_key": idempotency_key},
            ),
            done=lambda sub: not as_map(sub.get("pause_collection")),
            refused=subscription_ended,
        )

    def _final(
        self,
        action: str,
        object_id: str,
        *,
        read: Callable[[], Any],
        act: Callable[[], Any],
        done: Callable[[Mapping[str, Any]], bool],
        refused: Callable[[Mapping[str, Any]], str | None],
    ) -> FinalActionResult:
        """Read the object; done already → `ALREADY_DONE`; refused → `REFUSED`; else act,
        and if Stripe refuses the act, read again (it may have been done meanwhile)."""

        def result(outcome: ActionOutcome, answer: Answer, detail: str | None) -> FinalActionResult:
            return FinalActionResult(
                action=action,
                object_id=object_id,
                outcome=outcome,
                status=text(as_map(answer.body).get("status")),
                request_id=answer.request_id,
                detail=detail,
            )

        def failed(answer: Answer) -> FinalActionResult:
            assert answer.error is not None
            outcome = ActionOutcome.FAILED if answer.transport else ActionOutcome.REFUSED
            return result(outcome, answer, answer.error.detail)

        before = self._calls.call(read)
        if before.body is None:
            return failed(before)
        if done(before.body):
            return result(ActionOutcome.ALREADY_DONE, before, "already so")
        why = refused(before.body)
        if why is not None:
            return result(ActionOutcome.REFUSED, before, why)
        acted = self._calls.call(act)
        if acted.body is not None:
            return result(ActionOutcome.DONE, acted, None)
        if acted.transport:
            return failed(acted)
        after = self._calls.call(read)
        if after.body is not None and done(after.body):
            return result(ActionOutcome.ALREADY_DONE, after, "already so")
        return failed(acted)


__all__ = ["StripeFinalActions"]
