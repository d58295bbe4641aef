"""Hosted charging: Recoup charges an attempt itself, through the tenant's Stripe account, with
the receiver's rules (lock, re-check, charge once, record) on a ledger of its own
(`hosted_store`), so that a Stripe user writes and hosts no charge endpoint.

One attempt, keyed `charge:{invoice}:{n}` (the Idempotency-Key Stripe is sent):

1. The ledger settled this key already (a repeat of the attempt) → that answer again, no call.
2. Otherwise the ledger row is made `pending` (if it is not), and the invoice is read at Stripe
   (`look_up`). If a pay went out under this key before (`calls` > 0: its answer was lost to a
   timeout, a crash or a kill), the look-up says what became of it: paid → succeeded; a
   decline newer than the charge seen before the pay → that decline; voided → closed; still
   unknown → pending (asked again later, nothing paid). Only when Stripe shows no charge since
   is the invoice paid again, with the same key. Stripe's own idempotency is not relied on
   (keys expire after 24 hours; compatible servers ignore them); Stripe's invoice is the
   backstop: it is never paid twice.
3. A first pay reads the invoice first, too: paid already → `already_handled` (recovered
   another way), void or uncollectible → `closed`, and nothing is paid. Else the charge Stripe
   shows now is written down (the baseline of step 2), `calls` counted, and then the invoice is
   paid.

| Stripe says                   | the attempt's outcome                                   |
|-------------------------------|---------------------------------------------------------|
| paid                          | `succeeded`                                             |
| declined (402, or the charge) | `failed`, its codes (the generic `card_declined`: none) |
| authentication required       | `failed`, `authentication_required` (needs the customer)|
| already paid                  | `already_handled`                                       |
| void, uncollectible, deleted  | `closed` (dunning stops, not a recovery)                |
| refused the call (a 4xx)      | `errored` (not a decline)                               |
| 429, 5xx, timeout, network    | `pending`: asked again with the job's backoff, same key |

The Stripe calls of an attempt: one invoice read and one pay; a retry after a lost answer, one
read (and a pay only if nothing was charged). A read, and a pay's answer, also read the
invoice's payment intent (and charge) where Stripe names them by id only: at localstripe an
attempt is 4 requests (invoice, intent, pay, intent), a retry 2. Every answer's Stripe request
id goes to the run log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from recoup.dunning.invoice import Invoice, InvoiceState
from recoup.dunning.messages import ReportedOutcome
from recoup.payments.stripe_answers import InvoicePayment, StripeLookupFailed, StripeOutcome
from recoup.payments.stripe_reading import GENERIC_DECLINE
from recoup.recovery.hosted_store import (
    HostedCharge,
    HostedChargeState,
    HostedChargeStore,
    HostedCharging,
)
from recoup.sealed import Box

if TYPE_CHECKING:
    # The SDK is the `stripe` extra: imported when a tenant's attempt is first charged
    # through Stripe, so that a process without it (the embedded scheduler) never needs it.
    from recoup.payments.stripe_billing import StripeBilling

ACTION_REQUIRED_CODE = "authentication_required"


@dataclass(frozen=True, kw_only=True)
class HostedAnswer:
    """What a hosted charge answers for one attempt, as a charge endpoint would."""

    outcome: ReportedOutcome
    decline_code: str | None = None
    advice_code: str | None = None
    detail: str | None = None
    request_id: str | None = None  # Stripe's, of the call that decided

    def summary(self) -> str:
        """The attempt's line in its run log."""
        said = f"stripe: {self.outcome}"
        if self.decline_code:
            said += f" ({self.decline_code})"
        if self.detail:
            said += f": {self.detail}"
        return said + f" [request {self.request_id or 'none'}]"


_SETTLED_ANSWER: dict[HostedChargeState, ReportedOutcome] = {
    HostedChargeState.SUCCEEDED: "succeeded",
    HostedChargeState.DECLINED: "failed",
    HostedChargeState.ACTION_REQUIRED: "failed",
    HostedChargeState.PAID_ELSEWHERE: "already_handled",
    HostedChargeState.CLOSED: "closed",
}


class StripeAccounts:
    """A `StripeBilling` per tenant key, made on first use and kept (its HTTP connections are
    reused from one attempt to the next). `api_base` points every client at another
    Stripe-compatible server (`RECOUP_STRIPE_API_BASE`, for tests)."""

    def __init__(self, box: Box, *, api_base: str | None = None, timeout: float = 10.0) -> None:
        """`timeout`: seconds per Stripe request. An attempt makes up to four in a row (see the
        module docstring), which must fit in the attempt job's own timeout (60 s); a request
        that takes longer is in doubt, and the next try looks the invoice up."""
        self._box = box
        self._api_base = api_base
        self._timeout = timeout
        self._clients: dict[tuple[str, str], StripeBilling] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StripeAccounts(api_base={self._api_base!r})"

    def client(self, charging: HostedCharging) -> StripeBilling:
        key = (charging.tenant, charging.api_key)
        with self._lock:
            found = self._clients.get(key)
            if found is None:
                from recoup.payments.stripe_billing import StripeBilling

                found = StripeBilling(
                    self._box.open(charging.api_key),
                    api_base=self._api_base,
                    timeout=self._timeout,
                )
                self._clients[key] = found
            return found

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


class HostedCharger:
    """Charges attempts of tenants with hosted charging (rules in the module docstring).
    `now` stamps the ledger (the runtime's due clock)."""

    def __init__(
        self,
        store: HostedChargeStore,
        accounts: StripeAccounts,
        *,
        now: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.accounts = accounts
        self._now = now

    def charging(self, tenant: str) -> HostedCharging | None:
        return self.store.get_hosted_charging(tenant)

    def charge(
        self, charging: HostedCharging, invoice: Invoice, n: int, *, may_pay: bool
    ) -> HostedAnswer:
        """Charge attempt `n` of `invoice` (as Recoup holds it). `may_pay` False (the attempt
        was cancelled after its request went out: it is only asked what became of that
        request) looks up a pay that went out, and pays nothing."""
        key = f"charge:{invoice.invoice_id}:{n}"
        entry = self.store.get_hosted_charge(invoice.tenant, key)
        if entry is not None and entry.state.is_settled:
            return _replay(entry)
        now = self._now()
        if entry is None:
            entry = self.store.begin_hosted_charge(
                HostedCharge(
                    tenant=invoice.tenant,
                    charge_key=key,
                    invoice_id=invoice.invoice_id,
                    attempt=n,
                    state=HostedChargeState.PENDING,
                    created_at=now,
                    updated_at=now,
                )
            )
            if entry.state.is_settled:  # another try of the attempt settled it meanwhile
                return _replay(entry)
        asked_before = entry.calls > 0
        if not may_pay and not asked_before:
            return HostedAnswer(outcome="already_handled", detail="not charged: never asked")
        stripe = self.accounts.client(charging)
        if asked_before:
            seen = stripe.look_up(invoice.invoice_id, previous_charge_id=entry.provider_charge_id)
            if seen.outcome is StripeOutcome.SUCCEEDED and invoice.state is InvoiceState.RECOVERED:
                # Recovered (paid another way, as Recoup heard it) while this pay was in
                # doubt: Stripe pays an invoice once, so that one payment is counted already.
                # Stopped or exhausted instead, Recoup heard of no payment: the paid invoice
                # is this pay, to be heard (`invoice.charged_after_stop`), not swallowed.
                return self._settle(entry, seen, ours=False)
            if seen.outcome is not StripeOutcome.NOT_CHARGED:
                return self._settle(entry, seen, ours=True)
            if not may_pay:
                return HostedAnswer(
                    outcome="already_handled",
                    detail="not charged: the pay in doubt never reached Stripe",
                    request_id=seen.request_id,
                )
            baseline = entry.provider_charge_id
        else:
            seen = stripe.look_up(invoice.invoice_id)
            if seen.outcome in (StripeOutcome.SUCCEEDED, StripeOutcome.CLOSED):
                return self._settle(entry, seen, ours=False)  # paid or closed before: no pay
            if seen.outcome is StripeOutcome.IN_DOUBT:
                return self._settle(entry, seen, ours=False)
            baseline = seen.charge_id  # the charge the invoice shows before this pay
        # Written before the pay goes out: a crash from here on leaves `calls` > 0, and the
        # next try looks the invoice up against the baseline before it pays again.
        entry = self.store.record_hosted_charge(
            replace(entry, provider_charge_id=baseline, calls=entry.calls + 1, updated_at=now)
        )
        return self._settle(entry, stripe.pay(invoice.invoice_id, idempotency_key=key), ours=True)

    def _settle(self, entry: HostedCharge, said: InvoicePayment, *, ours: bool) -> HostedAnswer:
        """Record what Stripe said of the attempt and answer it. `ours`: a paid invoice is
        this attempt's pay (its answer, or a look-up after a pay in doubt); else it was paid
        before, or another way."""
        outcome = said.outcome
        if outcome in (StripeOutcome.IN_DOUBT, StripeOutcome.NOT_CHARGED):
            self.store.record_hosted_charge(
                replace(entry, request_id=said.request_id, updated_at=self._now())
            )
            return HostedAnswer(outcome="pending", detail=said.detail, request_id=said.request_id)
        if outcome is StripeOutcome.REFUSED:
            # Nothing moved, and the same call cannot help: not a decline. The row stays
            # pending, so a later try looks the invoice up before it pays.
            return HostedAnswer(outcome="errored", detail=said.detail, request_id=said.request_id)
        decline, advice = said.decline_code, said.advice_code
        match outcome:
            case StripeOutcome.SUCCEEDED if ours:
                state = HostedChargeState.SUCCEEDED
            case StripeOutcome.SUCCEEDED | StripeOutcome.PAID_ELSEWHERE:
                state = HostedChargeState.PAID_ELSEWHERE
            case StripeOutcome.CLOSED:
                state = HostedChargeState.CLOSED
            case StripeOutcome.ACTION_REQUIRED:
                state, decline = HostedChargeState.ACTION_REQUIRED, ACTION_REQUIRED_CODE
            case _:
                state = HostedChargeState.DECLINED
                decline = None if decline == GENERIC_DECLINE else decline
        settled = self.store.record_hosted_charge(
            replace(
                entry,
                state=state,
                provider_charge_id=said.charge_id or entry.provider_charge_id,
                decline_code=decline,
                advice_code=advice,
                request_id=said.request_id,
                updated_at=self._now(),
            )
        )
        return replace(_replay(settled), detail=said.detail)


@dataclass(frozen=True, kw_only=True)
class ActionAnswer:
    """What became of a final action at Stripe: done (or done already), to try again later
    (`retry`: a transport failure; every action reads before it acts), or refused."""

    done: bool
    retry: bool
    summary: str


def take_action(stripe: StripeBilling, invoice_id: str, action: str, *, key: str) -> ActionAnswer:
    """`action` (`job_specs.PROVIDER_ACTIONS`) for the invoice at Stripe, under the
    Idempotency-Key `key`: `mark_uncollectible` marks the invoice; `cancel` cancels its
    subscription; `pause_access` pauses the subscription's collection and `resume_access`
    resumes it. An invoice without a subscription has nothing to cancel or pause."""
    if action == "mark_uncollectible":
        result = stripe.mark_uncollectible(invoice_id, idempotency_key=key)
    else:
        try:
            subscription = stripe.subscription_of(invoice_id)
        except StripeLookupFailed as exc:
            return ActionAnswer(done=False, retry=exc.retry, summary=f"stripe: {exc}")
        if subscription is None:
            return ActionAnswer(
                done=True, retry=False, summary=f"stripe: {action} skipped: a one-off invoice"
            )
        act = {
            "cancel": stripe.cancel_subscription,
            "pause_access": stripe.pause_collection,
            "resume_access": stripe.resume_collection,
        }[action]
        result = act(subscription, idempotency_key=key)
    said = (
        f"stripe: {result.action} {result.object_id} {result.outcome}"
        f"{': ' + result.detail if result.detail else ''} [request {result.request_id or 'none'}]"
    )
    return ActionAnswer(done=result.ok, retry=result.retry, summary=said)


def _replay(entry: HostedCharge) -> HostedAnswer:
    """The answer of a settled ledger row (a repeat of the attempt calls nothing)."""
    return HostedAnswer(
        outcome=_SETTLED_ANSWER[entry.state],
        decline_code=entry.decline_code,
        advice_code=entry.advice_code,
        request_id=entry.request_id,
        detail="as recorded",
    )


__all__ = ["ActionAnswer", "HostedAnswer", "HostedCharger", "StripeAccounts", "take_action"]
