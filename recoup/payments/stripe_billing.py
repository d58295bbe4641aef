"""Stripe Billing as Recoup collects it: Recoup pays the Stripe invoice itself at each retry
(`POST /v1/invoices/{id}/pay`), looks an invoice up to learn what became of an attempt, reads
the facts of a failure, and takes the final actions of a dunning run. A small client over the
official `stripe` SDK (`stripe.StripeClient`), the only module of the package but the intake
route that imports it.

Idempotency is not left to Stripe. Every pay carries the caller's `Idempotency-Key`, but
Stripe keeps a key for 24 hours only and localstripe ignores keys altogether. The guard is
the invoice itself: Stripe never pays a paid invoice twice, and **a caller that got
`IN_DOUBT` looks the invoice up (`look_up`) before it pays again**, passing the charge it saw
before its attempt (`previous_charge_id`) so that an old decline is not taken for the answer
to the new attempt.

What a pay answers (`StripeOutcome`):

| Stripe says                                               | outcome           |
|-----------------------------------------------------------|-------------------|
| 200, invoice `paid`                                       | `SUCCEEDED`       |
| 402 card error (`decline_code`, else `code`)              | `DECLINED`        |
| 200, invoice still `open`, its latest charge `failed`     | `DECLINED`        |
| `authentication_required`, intent `requires_action`       | `ACTION_REQUIRED` |
| 4xx, and the invoice is `paid` ("already paid")           | `PAID_ELSEWHERE`  |
| invoice `void`, `uncollectible`, or deleted (404)         | `CLOSED`          |
| 4xx, invoice still open (no payment method, bad key, …)   | `REFUSED`         |
| 429, 5xx, timeout, connection error                       | `IN_DOUBT`        |
| (look-up) open, no charge since `previous_charge_id`      | `NOT_CHARGED`     |

The 200 with an open invoice is localstripe's shape of a decline. `REFUSED`: nothing moved
and the same call cannot help (fix the cause first). `IN_DOUBT` is never a decline.

A pay sends no parameter it does not need: off-session is Stripe's default for an invoice
pay, and localstripe answers 500 to a parameter it does not know (`off_session`).

Final actions (`mark_uncollectible`, `cancel_subscription`, `pause_collection`,
`resume_collection`) read the object first and act only when needed, so each is idempotent
whatever became of Stripe's key: done already → `ALREADY_DONE`. Stripe's refusals are
`REFUSED` and transport failures `FAILED` (`retry` true); none raises.

The API key is never logged, never put in a message (the SDK's error texts are scrubbed of
it) and never shown by a repr.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import stripe

from recoup.errors import InvalidInput
from recoup.payments.stripe_answers import (
    DETAIL_LIMIT,
    AccountCheck,
    ActionOutcome,
    FailureFacts,
    FinalActionResult,
    InvoicePayment,
    StripeLookupFailed,
    StripeOutcome,
)
from recoup.payments.stripe_answers import payment as make_payment
from recoup.payments.stripe_reading import (
    ENDED_SUBSCRIPTIONS,
    PaymentCodes,
    amount_remaining,
    as_list,
    as_map,
    codes_of_charge,
    codes_of_error,
    id_of,
    lower,
    subscription_ended,
    subscription_of,
    text,
)
from recoup.timekeeping.zones import zone

DEFAULT_TIMEOUT = 20.0  # seconds, per request (connect and read): shorter than a lock's hold
URL_LIMIT = 2000  # characters of a hosted invoice URL
# Codes by which Stripe says the customer must authenticate (3-D Secure) before a charge.
ACTION_CODES = frozenset(
    {"authentication_required", "invoice_payment_intent_requires_action", "requires_action"}
)
CLOSED_STATUSES = frozenset({"void", "uncollectible", "deleted"})


@dataclass(frozen=True)
class _Answer:
    """One SDK call: the object's JSON, or the error; Stripe's Request-Id either way."""

    body: Mapping[str, Any] | None
    error: stripe.StripeError | None
    request_id: str | None

    @property
    def transport(self) -> bool:
        """The call failed in transport (timeout, connection, 429, 5xx): its fate is unknown."""
        return self.error is not None and _is_transport(self.error)


@dataclass(frozen=True)
class _Payment:
    """The invoice's latest payment: its PaymentIntent and Charge as far as known."""

    intent: Mapping[str, Any]
    charge: Mapping[str, Any]
    unread: str | None = None  # why a part could not be read (a transport failure)


class StripeBilling:
    """A client of one Stripe account (one API key). `api_base` points it elsewhere than
    api.stripe.com (localstripe, a recording server); `timeout` bounds each request. The SDK's
    own retries are off: Recoup retries, after a look-up."""

    def __init__(
        self, api_key: str, *, api_base: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        if not api_key or not api_key.strip():
            raise InvalidInput("api_key", "", "expected a Stripe secret or restricted key")
        if timeout <= 0:
            raise InvalidInput("timeout", timeout, "expected a positive number of seconds")
        self._secret = api_key
        self._api_base = api_base
        self._http = stripe.RequestsClient(timeout=timeout)
        self._client = stripe.StripeClient(
            api_key,
            base_addresses={"api": api_base} if api_base else {},
            max_network_retries=0,
            http_client=self._http,
        )

    def __repr__(self) -> str:
        return f"StripeBilling(api_base={self._api_base!r}, livemode={self._livemode()})"

    def close(self) -> None:
        self._http.close()  # type: ignore[no-untyped-call]  # the SDK leaves it untyped

    def __enter__(self) -> StripeBilling:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Paying and looking up

    def pay(self, invoice_id: str, *, idempotency_key: str) -> InvoicePayment:
        """Pay the invoice now with the customer's default payment method (the table in the
        module docstring). Never raises for what Stripe answers."""
        if not idempotency_key:
            raise InvalidInput("idempotency_key", idempotency_key, "expected a non-empty key")
        answer = self._call(
            lambda: self._client.v1.invoices.pay(
                invoice_id, options={"idempotency_key": idempotency_key}
            )
        )
        if answer.body is not None:
            return self._read_invoice(invoice_id, answer.body, answer.request_id, None)
        assert answer.error is not None
        return self._pay_failed(invoice_id, answer.error, answer.request_id)

    def look_up(self, invoice_id: str, *, previous_charge_id: str | None = None) -> InvoicePayment:
        """What became of the invoice: paid → `SUCCEEDED`; void, uncollectible or deleted →
        `CLOSED`; open with a failed latest charge → `DECLINED`; open with no charge, or none
        newer than `previous_charge_id` (the charge the caller saw before its attempt) →
        `NOT_CHARGED`; the look-up itself failing → `IN_DOUBT`."""
        answer = self._retrieve_invoice(invoice_id)
        if answer.body is not None:
            return self._read_invoice(
                invoice_id, answer.body, answer.request_id, previous_charge_id
            )
        assert answer.error is not None
        if _is_missing(answer.error):
            return make_payment(
                StripeOutcome.CLOSED,
                invoice_id,
                status="deleted",
                request_id=answer.request_id,
                detail="no such invoice (deleted)",
            )
        return make_payment(
            StripeOutcome.IN_DOUBT,
            invoice_id,
            request_id=answer.request_id,
            detail=f"look-up failed: {self._detail(answer.error)}",
        )

    def subscription_of(self, invoice_id: str) -> str | None:
        """The subscription the invoice bills (None: a one-off invoice), from one read of the
        invoice. Raises `StripeLookupFailed` if the invoice cannot be read (a deleted one too:
        an invoice in dunning is finalized, and never deleted at Stripe)."""
        answer = self._retrieve_invoice(invoice_id)
        if answer.body is None:
            assert answer.error is not None
            raise StripeLookupFailed(invoice_id, self._detail(answer.error), retry=answer.transport)
        return subscription_of(answer.body)

    def failure_facts(self, invoice_id: str) -> FailureFacts:
        """The facts of the invoice's failure (see `FailureFacts`). Raises
        `StripeLookupFailed` if the invoice itself cannot be read; a customer, subscription or
        payment method that cannot be read leaves its fields None, noted."""
        answer = self._retrieve_invoice(invoice_id)
        if answer.body is None:
            assert answer.error is not None
            raise StripeLookupFailed(invoice_id, self._detail(answer.error), retry=answer.transport)
        inv, notes = answer.body, []
        payment = self._latest_payment(inv)
        if payment.unread:
            notes.append(payment.unread)
        codes = _codes(payment)
        card, card_unread = self._card_of(payment)
        if card_unread:
            notes.append(card_unread)
        customer_id, subscription_id = id_of(inv.get("customer")), subscription_of(inv)
        customer = self._related(inv.get("customer"), "customers", notes)
        subscription = as_map(inv.get("subscription_details")) or as_map(
            as_map(inv.get("parent")).get("subscription_details")
        )
        if not as_map(subscription.get("metadata")):
            subscription = self._related(subscription_id, "subscriptions", notes)
        timezone, source = None, None
        for where, holder in (
            ("invoice", inv),
            ("subscription", subscription),
            ("customer", customer),
        ):
            name = text(as_map(holder.get("metadata")).get("timezone"))
            if name is None:
                continue
            try:
                zone(name)
            except InvalidInput:
                notes.append(f"the {where}'s metadata timezone {name[:64]!r} is no IANA zone")
                continue
            timezone, source = name, where
            break
        country = text(as_map(inv.get("customer_address")).get("country"), 2) or text(
            as_map(customer.get("address")).get("country"), 2
        )
        return FailureFacts(
            invoice_id=invoice_id,
            invoice_status=text(inv.get("status")),
            customer_id=customer_id,
            subscription_id=subscription_id,
            amount_remaining=amount_remaining(inv),
            currency=lower(inv.get("currency")),
            charge_id=id_of(payment.charge),
            decline_code=codes.decline,
            advice_code=codes.advice,
            card_fingerprint=codes.fingerprint or text(card.get("fingerprint")),
            card_brand=lower(card.get("brand")),
            card_network=codes.network or lower(card.get("network")) or lower(card.get("brand")),
            card_country=text(card.get("country"), 2),
            customer_country=None if country is None else country.upper(),
            timezone=timezone,
            timezone_source=source,
            hosted_invoice_url=text(inv.get("hosted_invoice_url"), URL_LIMIT),
            request_id=answer.request_id,
            notes=tuple(notes),
        )

    # Final actions

    def mark_uncollectible(self, invoice_id: str, *, idempotency_key: str) -> FinalActionResult:
        """Write the invoice off (`POST /v1/invoices/{id}/mark_uncollectible`). Already
        uncollectible → `ALREADY_DONE`; paid or void → `REFUSED`."""
        return self._final(
            "mark_uncollectible",
            invoice_id,
            read=lambda: self._client.v1.invoices.retrieve(invoice_id),
            act=lambda: self._client.v1.invoices.mark_uncollectible(
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
            read=lambda: self._client.v1.subscriptions.retrieve(subscription_id),
            act=lambda: self._client.v1.subscriptions.cancel(
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
            read=lambda: self._client.v1.subscriptions.retrieve(subscription_id),
            act=lambda: self._client.v1.subscriptions.update(
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
            read=lambda: self._client.v1.subscriptions.retrieve(subscription_id),
            act=lambda: self._client.v1.subscriptions.update(
                subscription_id,
                {"pause_collection": ""},
                options={"idempotency_key": idempotency_key},
            ),
            done=lambda sub: not as_map(sub.get("pause_collection")),
            refused=subscription_ended,
        )

    def check(self) -> AccountCheck:
        """Verify the key against the API with a call that restricted keys with invoice access
        and localstripe both answer (`GET /v1/invoices?limit=1`)."""
        answer = self._call(lambda: self._client.v1.invoices.list({"limit": 1}))
        livemode = self._livemode()
        if answer.body is None:
            assert answer.error is not None
            return AccountCheck(
                ok=False,
                livemode=livemode,
                retry=answer.transport,
                request_id=answer.request_id,
                detail=self._detail(answer.error),
            )
        for invoice in as_list(answer.body.get("data"))[:1]:
            if isinstance(invoice.get("livemode"), bool):
                livemode = invoice["livemode"]
        return AccountCheck(
            ok=True,
            livemode=livemode,
            retry=False,
            request_id=answer.request_id,
            detail="live mode" if livemode else "test mode",
        )

    # Reading Stripe's answers

    def _pay_failed(
        self, invoice_id: str, error: stripe.StripeError, request_id: str | None
    ) -> InvoicePayment:
        detail = self._detail(error)
        if _is_transport(error):
            return make_payment(
                StripeOutcome.IN_DOUBT, invoice_id, request_id=request_id, detail=detail
            )
        body = as_map(as_map(error.json_body).get("error"))
        intent = as_map(body.get("payment_intent"))
        charge_id = id_of(body.get("charge"))
        if {text(body.get("code")), text(body.get("decline_code"))} & ACTION_CODES or intent.get(
            "status"
        ) == "requires_action":
            return make_payment(
                StripeOutcome.ACTION_REQUIRED,
                invoice_id,
                status="open",
                charge_id=charge_id,
                request_id=request_id,
                detail=detail,
            )
        if error.http_status == 402 or isinstance(error, stripe.CardError):
            codes = codes_of_error(body)
            return make_payment(
                StripeOutcome.DECLINED,
                invoice_id,
                status="open",
                charge_id=charge_id,
                decline_code=codes.decline or text(body.get("code")),
                advice_code=codes.advice,
                request_id=request_id,
                detail=detail,
            )
        # Refused before anything moved: the invoice's state says why (localstripe answers a
        # void invoice's pay with a bare "Bad request").
        now = self.look_up(invoice_id)
        if now.outcome is StripeOutcome.SUCCEEDED or (
            now.outcome is StripeOutcome.IN_DOUBT and "already paid" in detail.lower()
        ):
            outcome = StripeOutcome.PAID_ELSEWHERE
        elif now.outcome is StripeOutcome.CLOSED:
            outcome = StripeOutcome.CLOSED
        else:
            outcome = StripeOutcome.REFUSED
        return InvoicePayment(
            outcome=outcome,
            invoice_id=invoice_id,
            invoice_status=now.invoice_status,
            charge_id=now.charge_id if outcome is StripeOutcome.PAID_ELSEWHERE else None,
            decline_code=None,
            advice_code=None,
            request_id=request_id,
            detail=detail,
            hosted_invoice_url=now.hosted_invoice_url,
        )

    def _read_invoice(
        self,
        invoice_id: str,
        inv: Mapping[str, Any],
        request_id: str | None,
        previous_charge_id: str | None,
    ) -> InvoicePayment:
        status = text(inv.get("status"))
        url = text(inv.get("hosted_invoice_url"), URL_LIMIT)

        def answer(outcome: StripeOutcome, detail: str, **fields: Any) -> InvoicePayment:
            return make_payment(
                outcome,
                invoice_id,
                status="deleted" if inv.get("deleted") is True else status,
                request_id=request_id,
                detail=detail,
                url=url,
                **fields,
            )

        if inv.get("deleted") is True or status in CLOSED_STATUSES:
            return answer(StripeOutcome.CLOSED, f"the invoice is {status or 'deleted'}")
        payment = self._latest_payment(inv)
        charge_id = id_of(payment.charge)
        if status == "paid":
            return answer(StripeOutcome.SUCCEEDED, "the invoice is paid", charge_id=charge_id)
        if payment.unread:
            return answer(StripeOutcome.IN_DOUBT, payment.unread)
        if payment.intent.get("status") == "requires_action":
            return answer(StripeOutcome.ACTION_REQUIRED, "the customer must authenticate")
        if charge_id is None or charge_id == previous_charge_id:
            return answer(StripeOutcome.NOT_CHARGED, f"the invoice is {status}, not charged")
        charge_status = text(payment.charge.get("status"))
        if charge_status == "failed":
            codes = _codes(payment)
            return answer(
                StripeOutcome.DECLINED,
                text(payment.charge.get("failure_message")) or "the charge failed",
                charge_id=charge_id,
                decline_code=codes.decline,
                advice_code=codes.advice,
            )
        return answer(
            StripeOutcome.IN_DOUBT,
            f"the invoice is {status} and its latest charge {charge_status}",
            charge_id=charge_id,
        )

    def _latest_payment(self, inv: Mapping[str, Any]) -> _Payment:
        """The invoice's latest PaymentIntent and Charge. Before API version 2025-03-31.basil
        (and at localstripe) the invoice names them (`payment_intent`, `charge`); from basil
        on its payments are listed apart (`GET /v1/invoice_payments?invoice=`)."""
        intent: Any = inv.get("payment_intent")
        charge: Any = inv.get("charge")
        invoice_id = text(inv.get("id"))
        if "payment_intent" not in inv and "charge" not in inv and invoice_id is not None:
            listed = self._call(
                lambda: self._client.v1.invoice_payments.list({"invoice": invoice_id, "limit": 1})
            )
            if listed.transport:
                return _Payment({}, {}, "the invoice's payments could not be read")
            for entry in as_list(as_map(listed.body).get("data"))[:1]:
                payment = as_map(entry.get("payment"))
                intent, charge = payment.get("payment_intent"), payment.get("charge")
        if isinstance(intent, str):
            read = self._call(lambda: self._client.v1.payment_intents.retrieve(intent))
            if read.transport:
                return _Payment({}, {}, "the invoice's payment intent could not be read")
            intent = as_map(read.body)
        intent = as_map(intent)
        if charge is None:
            charge = intent.get("latest_charge")
        if isinstance(charge, str):
            read = self._call(lambda: self._client.v1.charges.retrieve(charge))
            if read.transport:
                return _Payment(intent, {"id": charge}, "the invoice's charge could not be read")
            charge = read.body or {"id": charge}
        return _Payment(intent, as_map(charge))

    def _card_of(self, payment: _Payment) -> tuple[Mapping[str, Any], str | None]:
        """The card of the payment: the charge's `payment_method_details.card`, else its
        payment method's `card` (localstripe has no details on its charges)."""
        card = as_map(as_map(payment.charge.get("payment_method_details")).get("card"))
        if card:
            return card, None
        method = payment.charge.get("payment_method") or payment.intent.get("payment_method")
        if isinstance(method, Mapping):
            return as_map(method.get("card")), None
        method_id = text(method)
        if method_id is None:
            return {}, None
        read = self._call(lambda: self._client.v1.payment_methods.retrieve(method_id))
        if read.body is None:
            return {}, "the payment method could not be read"
        return as_map(read.body.get("card")), None

    def _related(self, ref: Any, kind: str, notes: list[str]) -> Mapping[str, Any]:
        """An object the invoice refers to (expanded already, or read by its id)."""
        if isinstance(ref, Mapping):
            return ref
        ref_id = text(ref)
        if ref_id is None:
            return {}
        service = getattr(self._client.v1, kind)
        read = self._call(lambda: service.retrieve(ref_id))
        if read.body is None:
            notes.append(f"the {kind[:-1]} {ref_id} could not be read")
            return {}
        return read.body

    def _retrieve_invoice(self, invoice_id: str) -> _Answer:
        return self._call(lambda: self._client.v1.invoices.retrieve(invoice_id))

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

        def result(
            outcome: ActionOutcome, answer: _Answer, detail: str | None
        ) -> FinalActionResult:
            return FinalActionResult(
                action=action,
                object_id=object_id,
                outcome=outcome,
                status=text(as_map(answer.body).get("status")),
                request_id=answer.request_id,
                detail=detail,
            )

        def failed(answer: _Answer) -> FinalActionResult:
            assert answer.error is not None
            outcome = ActionOutcome.FAILED if answer.transport else ActionOutcome.REFUSED
            return result(outcome, answer, self._detail(answer.error))

        before = self._call(read)
        if before.body is None:
            return failed(before)
        if done(before.body):
            return result(ActionOutcome.ALREADY_DONE, before, "already so")
        why = refused(before.body)
        if why is not None:
            return result(ActionOutcome.REFUSED, before, why)
        acted = self._call(act)
        if acted.body is not None:
            return result(ActionOutcome.DONE, acted, None)
        if acted.transport:
            return failed(acted)
        after = self._call(read)
        if after.body is not None and done(after.body):
            return result(ActionOutcome.ALREADY_DONE, after, "already so")
        return failed(acted)

    def _call(self, call: Callable[[], Any]) -> _Answer:
        """Run one SDK call; its answer as JSON, or its error. Raises nothing of Stripe's."""
        try:
            found = call()
        except stripe.StripeError as exc:
            return _Answer(None, exc, text(exc.request_id))
        response = found.last_response
        request_id = text(response.request_id) if response is not None else None
        return _Answer(found.to_dict(), None, request_id)

    def _detail(self, error: stripe.StripeError) -> str:
        """A short line of the error, scrubbed of the API key."""
        message = error.user_message or type(error).__name__
        if isinstance(error, stripe.APIConnectionError):
            # The SDK wraps the network error in a paragraph of advice: keep the error.
            cause = message.rpartition("(Network error: ")[2].strip()
            message = "network error: " + (cause[:-1] if cause.endswith(")") else cause)
        message = " ".join(message.split())
        status = f"HTTP {error.http_status}: " if error.http_status else ""
        line = f"{status}{message}".replace(self._secret, "[api key]")
        return line[:DETAIL_LIMIT]

    def _livemode(self) -> bool:
        return "_live_" in self._secret[:8]


def _codes(payment: _Payment) -> PaymentCodes:
    """The failed payment's codes: the intent's `last_payment_error`, richer on Stripe, else
    the charge's; the generic `card_declined` when nothing more specific is given (the
    decline is still told, as `decline_code` else `code`)."""
    error = as_map(payment.intent.get("last_payment_error"))
    from_charge = codes_of_charge(payment.charge)
    codes = codes_of_error(error) if error else from_charge
    decline = (
        codes.decline
        or from_charge.decline
        or text(error.get("code"))
        or text(payment.charge.get("failure_code"))
    )
    return PaymentCodes(
        decline=decline,
        advice=codes.advice or from_charge.advice,
        fingerprint=codes.fingerprint or from_charge.fingerprint,
        network=codes.network or from_charge.network,
    )


def _is_transport(error: stripe.StripeError) -> bool:
    if isinstance(error, stripe.APIConnectionError | stripe.RateLimitError | stripe.APIError):
        return True
    return error.http_status is None or error.http_status == 429 or error.http_status >= 500


def _is_missing(error: stripe.StripeError) -> bool:
    return error.http_status == 404 or error.code == "resource_missing"


__all__ = [
    "AccountCheck",
    "ActionOutcome",
    "FailureFacts",
    "FinalActionResult",
    "InvoicePayment",
    "StripeBilling",
    "StripeLookupFailed",
    "StripeOutcome",
]
