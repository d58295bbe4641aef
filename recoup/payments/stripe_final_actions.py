"""The final actions of a dunning run at Stripe (`mark_uncollectible`, `cancel_subscription`,
`pause_collection`, `resume_collection`): each reads the object first and acts only when
needed, so each is idempotent whatever became of Stripe's key: done already →
`ALREADY_DONE`. Stripe's refusals are `REFUSED` and transport failures `FAILED` (`retry`
true); none raises. Through the connection of `stripe_calls.StripeCalls`: no SDK here.

Each action is data (`_Action`: the service it reads and acts on, its call, what says it is
done already or refused) and one method, `_final`, calls and answers for all four.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from recoup.payments.stripe_answers import ActionOutcome, FinalActionResult
from recoup.payments.stripe_calls import Answer, StripeCalls
from recoup.payments.stripe_reading import ENDED_SUBSCRIPTIONS, as_map, subscription_ended, text

_Object = Mapping[str, Any]  # an invoice or subscription as Stripe answered it


@dataclass(frozen=True, kw_only=True, slots=True)
class _Action:
    """One final action: the SDK service (`v1.invoices`, `v1.subscriptions`) whose object it
    reads (`retrieve`) and acts on (`act`, given the service, the object's id and the call's
    options, the idempotency key among them), and what of the object read says the action is
    done already (`done`) or cannot be done (`refused`, why)."""

    name: str
    service: Literal["invoices", "subscriptions"]
    act: Callable[[Any, str, Mapping[str, str]], Any]
    done: Callable[[_Object], bool]
    refused: Callable[[_Object], str | None]


def _settled(invoice: _Object) -> str | None:
    status = invoice.get("status")
    return f"the invoice is {status}" if status in ("paid", "void") else None


_MARK_UNCOLLECTIBLE = _Action(
    name="mark_uncollectible",
    service="invoices",
    act=lambda invoices, object_id, options: invoices.mark_uncollectible(
        object_id, options=options
    ),
    done=lambda invoice: invoice.get("status") == "uncollectible",
    refused=_settled,
)
_CANCEL_SUBSCRIPTION = _Action(
    name="cancel_subscription",
    service="subscriptions",
    act=lambda subscriptions, object_id, options: subscriptions.cancel(object_id, options=options),
    done=lambda subscription: subscription.get("status") in ENDED_SUBSCRIPTIONS,
    refused=lambda subscription: None,
)
_PAUSE_COLLECTION = _Action(
    name="pause_collection",
    service="subscriptions",
    act=lambda subscriptions, object_id, options: subscriptions.update(
        object_id, {"pause_collection": {"behavior": "keep_as_draft"}}, options=options
    ),
    done=lambda subscription: (
        as_map(subscription.get("pause_collection")).get("behavior") == "keep_as_draft"
    ),
    refused=subscription_ended,
)
_RESUME_COLLECTION = _Action(
    name="resume_collection",
    service="subscriptions",
    act=lambda subscriptions, object_id, options: subscriptions.update(
        object_id, {"pause_collection": ""}, options=options
    ),
    done=lambda subscription: not as_map(subscription.get("pause_collection")),
    refused=subscription_ended,
)


class StripeFinalActions:
    """The final actions on one Stripe account's invoices and subscriptions, through `calls`."""

    def __init__(self, calls: StripeCalls) -> None:
        self._calls = calls

    def mark_uncollectible(self, invoice_id: str, *, idempotency_key: str) -> FinalActionResult:
        """Write the invoice off (`POST /v1/invoices/{id}/mark_uncollectible`). Already
        uncollectible → `ALREADY_DONE`; paid or void → `REFUSED`."""
        return self._final(_MARK_UNCOLLECTIBLE, invoice_id, idempotency_key)

    def cancel_subscription(
        self, subscription_id: str, *, idempotency_key: str
    ) -> FinalActionResult:
        """Cancel the subscription now (`DELETE /v1/subscriptions/{id}`). Already canceled
        (or expired incomplete) → `ALREADY_DONE`."""
        return self._final(_CANCEL_SUBSCRIPTION, subscription_id, idempotency_key)

    def pause_collection(self, subscription_id: str, *, idempotency_key: str) -> FinalActionResult:
        """Pause the subscription's collection, its invoices kept as drafts
        (`pause_collection[behavior]=keep_as_draft`). Paused so already → `ALREADY_DONE`; an
        ended subscription → `REFUSED`."""
        return self._final(_PAUSE_COLLECTION, subscription_id, idempotency_key)

    def resume_collection(self, subscription_id: str, *, idempotency_key: str) -> FinalActionResult:
        """Resume the subscription's collection (`pause_collection=""` clears the pause). Not
        paused → `ALREADY_DONE`; an ended subscription → `REFUSED`."""
        return self._final(_RESUME_COLLECTION, subscription_id, idempotency_key)

    def _final(self, action: _Action, object_id: str, idempotency_key: str) -> FinalActionResult:
        """Read the object; done already → `ALREADY_DONE`; refused → `REFUSED`; else act,
        and if Stripe refuses the act, read again (it may have been done meanwhile)."""
        options = {"idempotency_key": idempotency_key}

        def read() -> Any:
            return getattr(self._calls.v1, action.service).retrieve(object_id)

        def act() -> Any:
            return action.act(getattr(self._calls.v1, action.service), object_id, options)

        def result(outcome: ActionOutcome, answer: Answer, detail: str | None) -> FinalActionResult:
            return FinalActionResult(
                action=action.name,
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
        if action.done(before.body):
            return result(ActionOutcome.ALREADY_DONE, before, "already so")
        why = action.refused(before.body)
        if why is not None:
            return result(ActionOutcome.REFUSED, before, why)
        acted = self._calls.call(act)
        if acted.body is not None:
            return result(ActionOutcome.DONE, acted, None)
        if acted.transport:
            return failed(acted)
        after = self._calls.call(read)
        if after.body is not None and action.done(after.body):
            return result(ActionOutcome.ALREADY_DONE, after, "already so")
        return failed(acted)


__all__ = ["StripeFinalActions"]
