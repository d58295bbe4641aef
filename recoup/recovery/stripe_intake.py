"""Failure intake from Stripe: a verified webhook event in, the dunning runtime's operations
out, each event acted on once.

The HTTP edge verifies the `Stripe-Signature` with the tenant's secret
(`tenant_settings.webhook_secret`) and
hands the parsed event to `receive`, which claims the event id in the intake store (a
replay answers what the first delivery answered and changes nothing; see
`recoup.recovery.intake_store`), reads it (`recoup.recovery.stripe_events`) and acts:

- a failure (`invoice.payment_failed`, or `invoice.payment_action_required`: decline code
  `authentication_required`) caused by Recoup's attempt n → `report_outcome(n, "failed",
  codes)`: `attempt_failed`;
- a failure older than a payment or a closing of the invoice already processed (the events
  crossed), or of an invoice whose subscription's cancellation was processed → nothing:
  `ignored`;
- a failure of an invoice not in dunning → `report_failure`: `dunning_opened` (the same
  failure again opens nothing more). With the tenant's Stripe key (hosted charging), what the
  event lacks is read at Stripe first (`StripeBilling.failure_facts`: the invoice, its
  payment or charge, customer and subscription) — see "Facts from Stripe" below; an invoice
  Stripe shows paid, void or uncollectible by then opens nothing (`ignored`);
- another failure of an invoice in dunning (Stripe's own retry, a payment page) → nothing,
  its retries stand: `already_in_dunning`;
- a payment caused by Recoup's attempt n → `report_outcome(n, "succeeded")`:
  `attempt_succeeded`;
- a payment → `mark_paid`, the remaining attempts cancelled: `recovered`; of an invoice
  recovered already: `already_recovered`; of one never in dunning: `not_in_dunning` (recorded,
  so that a failure arriving late is known stale);
- an invoice voided or marked uncollectible → `stop(reason)`: `dunning_cancelled` (its open
  attempts cancelled, nothing charged again); of an invoice not in dunning: `not_in_dunning`
  (recorded, so that a failure arriving late is known stale); of one whose dunning had ended
  (recovered, exhausted, stopped): `already_final`, unchanged;
- a subscription cancelled or set to cancel, a customer's card update, an upcoming renewal
  (the customer-level events) → acted on across the customer's invoices as
  `recovery.stripe_customer_events` states: `dunning_cancelled` or `not_in_dunning`,
  `payment_method_updated`, `reminders_cancelled` or `ignored`, `renewal_recorded`;
- anything else → nothing: `ignored`, saying why.

Facts from Stripe: when the tenant has a Stripe key and the event lacks a part of a failure,
it is completed from `failure_facts` (`recovery.stripe_facts`, its rules). A facts read that
fails loses nothing: dunning opens from what the event had, and the detail says so (the event
is not released). A Stripe read for a subscription's end that fails does release it
(`recovery.stripe_customer_events`).

An operation that fails (the tenant has no charge URL, the database is down) releases the
claim and raises: the edge answers an error, and Stripe's retry runs afresh. Events of types
the intake never acts on are answered without being recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from recoup.dunning.invoice import InvoiceState
from recoup.errors import Conflict, RecoupError
from recoup.idempotency import DEFAULT_LOCK_TIMEOUT
from recoup.recovery.hosted_charging import StripeAccounts
from recoup.recovery.intake_store import (
    Answered,
    Busy,
    IntakeEvent,
    IntakeStore,
)
from recoup.recovery.service import Dunning
from recoup.recovery.stripe_customer_events import Acted, CustomerEvents
from recoup.recovery.stripe_events import (
    CLOSED_TYPES,
    PAID_TYPES,
    SUBSCRIPTION_DELETED,
    SUPPORTED,
    CardUpdated,
    Ignored,
    InvoiceClosed,
    InvoiceFailed,
    InvoicePaid,
    Reading,
    SubscriptionEnded,
    event_head,
    read_event,
)
from recoup.recovery.stripe_facts import CLOSED_AT_STRIPE, completed, wants_facts
from recoup.recovery.stripe_intake_settings import StripeIntakeSettings
from recoup.recovery.stripe_renewals import UPCOMING_TYPE, RenewalUpcoming, read_upcoming
from recoup.sealed import Box

if TYPE_CHECKING:
    from recoup.payments.stripe_billing import StripeBilling

log = logging.getLogger("recoup.intake")

PROVIDER = "stripe"
# How long a processed event is remembered: past Stripe's retries (3 days) and the 30 days in
# which an event can still be sent again (the Events API keeps 30 days).
RETENTION = timedelta(days=35)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class EventInProgress(Conflict):
    """Another delivery of the event is being processed; retry in `retry_after` seconds."""

    def __init__(self, event_id: str, retry_after: int) -> None:
        super().__init__(f"event {event_id!r} is being processed by another delivery")
        self.retry_after = retry_after


@dataclass(frozen=True, kw_only=True)
class IntakeAnswer:
    """What the intake did with an event (the webhook's 200 body)."""

    event_id: str
    type: str
    outcome: str
    detail: str
    invoices: tuple[tuple[str, str], ...] = ()  # (invoice id, its state now)
    replayed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "type": self.type,
            "outcome": self.outcome,
            "detail": self.detail,
            "invoices": [{"invoice_id": i, "state": s} for i, s in self.invoices],
            "replayed": self.replayed,
        }

    @classmethod
    def replay_of(cls, stored: Mapping[str, Any]) -> IntakeAnswer:
        return cls(
            event_id=str(stored["event_id"]),
            type=str(stored["type"]),
            outcome=str(stored["outcome"]),
            detail=str(stored["detail"]),
            invoices=tuple((str(i["invoice_id"]), str(i["state"])) for i in stored["invoices"]),
            replayed=True,
        )


class StripeIntake:
    """Stripe's webhooks for every tenant, acted on through `dunning`, recorded in `store`."""

    def __init__(
        self,
        dunning: Dunning,
        store: IntakeStore,
        *,
        box: Box,
        lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
        retention: timedelta = RETENTION,
        stripe: StripeAccounts | None = None,
    ) -> None:
        """`box` seals the endpoint secret before it is stored and opens it to verify.
        `stripe`: the tenants' Stripe accounts, read with a tenant's key when it has one
        (hosted charging); without it, only the events' own fields are used."""
        self.dunning = dunning
        self.store = store
        self.box = box
        self.lock_timeout = lock_timeout
        self.retention = retention
        self.stripe = stripe
        # The tenants' endpoint secrets and default zones (`stripe_intake_settings`).
        self.tenant_settings = StripeIntakeSettings(store, box, now=dunning.clock.now)
        # The customer-level events (`stripe_customer_events`).
        self.customers = CustomerEvents(dunning, client=self._client)

    # -- events in ---------------------------------------------------------------------------

    def receive(self, tenant: str, event: Mapping[str, Any]) -> IntakeAnswer:
        """Act on a verified event once (the table in the module docstring)."""
        head = event_head(event)
        if head.type not in SUPPORTED and head.type != UPCOMING_TYPE:
            return IntakeAnswer(
                event_id=head.id,
                type=head.type,
                outcome="ignored",
                detail=f"event type {head.type} is not one the intake acts on",
            )
        zone = self.tenant_settings.settings(tenant).default_timezone
        reading: Reading | RenewalUpcoming = (
            read_upcoming(head, default_timezone=zone)
            if head.type == UPCOMING_TYPE
            else read_event(head, default_timezone=zone)
        )
        record = IntakeEvent(
            tenant=tenant,
            provider=PROVIDER,
            event_id=head.id,
            type=head.type,
            invoice_id=_about(reading),
            occurred_at=head.created,
        )
        claim = self.store.claim_event(
            record, now=self.dunning.clock.now(), lock_timeout=self.lock_timeout
        )
        if isinstance(claim, Answered):
            return IntakeAnswer.replay_of(claim.answer)
        if isinstance(claim, Busy):
            raise EventInProgress(head.id, claim.retry_after)
        try:
            acted = self._act(tenant, reading, head.type)
        except BaseException:
            self.store.release_event(record, claimed_at=claim.claimed_at)
            raise
        answer = IntakeAnswer(
            event_id=head.id,
            type=head.type,
            outcome=acted.outcome,
            detail=acted.detail,
            invoices=tuple((i.invoice_id, str(i.state)) for i in acted.invoices),
        )
        self.store.finish_event(
            record,
            claimed_at=claim.claimed_at,
            outcome=acted.outcome,
            answer=answer.to_json(),
            now=self.dunning.clock.now(),
        )
        return answer

    def prune(self, *, batch: int = 5_000) -> int:
        """Forget processed events older than the retention, in batches (each its own short
        transaction); returns how many."""
        cutoff = self.dunning.clock.now() - self.retention
        total = 0
        while True:
            pruned = self.store.prune_events(older_than=cutoff, limit=batch)
            total += pruned
            if pruned < batch:
                return total

    def _act(self, tenant: str, reading: Reading | RenewalUpcoming, event_type: str) -> Acted:
        match reading:
            case RenewalUpcoming():
                return self.customers.upcoming(tenant, reading)
            case InvoiceFailed():
                return self._failed(tenant, reading, event_type)
            case InvoicePaid():
                return self._paid(tenant, reading)
            case InvoiceClosed():
                return self._closed(tenant, reading)
            case SubscriptionEnded():
                return self.customers.subscription_ended(tenant, reading)
            case CardUpdated():
                return self.customers.card_updated(tenant, reading)
            case Ignored():
                return Acted("ignored", reading.why)

    def _failed(self, tenant: str, failed: InvoiceFailed, event_type: str) -> Acted:
        dunning = self.dunning
        known = dunning.store.get_invoice(tenant, failed.invoice_id)
        if known is not None and failed.attempt is not None and known.attempt(failed.attempt):
            invoice = dunning.report_outcome(
                tenant,
                failed.invoice_id,
                failed.attempt,
                "failed",
                decline_code=failed.decline_code,
                advice_code=failed.advice_code,
                detail=event_type,
            )
            return Acted("attempt_failed", f"Recoup's attempt {failed.attempt} failed", [invoice])
        if self.store.invoice_event_since(
            tenant, PROVIDER, failed.invoice_id, types=PAID_TYPES, since=failed.failed_at
        ):
            return Acted(
                "ignored", "the invoice was paid after this failure (the events arrived crossed)"
            )
        if self.store.invoice_event_since(
            tenant, PROVIDER, failed.invoice_id, types=CLOSED_TYPES, since=failed.failed_at
        ):
            return Acted(
                "ignored", "the invoice was closed (voided or written off) after this failure"
            )
        ended = failed.subscription_id
        if ended is not None and self.store.invoice_event_since(
            tenant, PROVIDER, ended, types=(SUBSCRIPTION_DELETED,), since=_EPOCH
        ):
            return Acted(
                "ignored", f"the invoice's subscription {ended} is cancelled: it is dunned no more"
            )
        if known is None:
            completed = self._with_facts(tenant, failed)
            if isinstance(completed, Acted):
                return completed
            failed = completed
        notes = "; ".join(failed.notes)
        report = failed.to_report()  # checked before anything is written
        if failed.hosted_invoice_url is not None:  # the emails' link
            dunning.store.messages.put_payment_page(
                tenant, failed.invoice_id, failed.hosted_invoice_url, at=dunning.clock.now()
            )
        try:
            invoice, created = dunning.report_failure(tenant, report)
        except Conflict:
            return Acted(
                "already_in_dunning",
                "a later failure of an invoice in dunning: its retries stand",
                [dunning.get(tenant, failed.invoice_id)],
            )
        detail = "dunning opened" if created else "dunning was opened by this same failure"
        return Acted("dunning_opened", f"{detail}; {notes}" if notes else detail, [invoice])

    def _paid(self, tenant: str, paid: InvoicePaid) -> Acted:
        dunning = self.dunning
        invoice = dunning.store.get_invoice(tenant, paid.invoice_id)
        if invoice is None:
            return Acted("not_in_dunning", "the invoice is not in dunning")
        if paid.attempt is not None and invoice.attempt(paid.attempt) is not None:
            done = dunning.report_outcome(
                tenant, paid.invoice_id, paid.attempt, "succeeded", detail="invoice.paid"
            )
            return Acted("attempt_succeeded", f"Recoup's attempt {paid.attempt} succeeded", [done])
        if invoice.state is InvoiceState.RECOVERED:
            return Acted("already_recovered", f"recovered by {invoice.recovered_by}", [invoice])
        done = dunning.mark_paid(tenant, paid.invoice_id)
        return Acted("recovered", "paid out of band: the remaining attempts are cancelled", [done])

    def _with_facts(self, tenant: str, failed: InvoiceFailed) -> InvoiceFailed | Acted:
        """The failure completed from Stripe's facts where the event lacks a part (see the
        module docstring); as it is without a key or when nothing is missing; `ignored` when
        Stripe shows the invoice paid or closed by now."""
        if not wants_facts(failed) or self.stripe is None:
            return failed
        try:  # the key unopened (another secret key) is a read that failed too
            client = self._client(tenant)
            if client is None:
                return failed
            facts = client.failure_facts(failed.invoice_id)
        except RecoupError as exc:
            log.warning("tenant %s: Stripe facts of %s unread: %s", tenant, failed.invoice_id, exc)
            return replace(
                failed,
                notes=(*failed.notes, f"Stripe's facts could not be read ({exc}): the event's own"),
            )
        if facts.invoice_status in CLOSED_AT_STRIPE:
            return Acted(
                "ignored", f"the invoice is {facts.invoice_status} at Stripe: nothing to collect"
            )
        return completed(failed, facts)

    def _client(self, tenant: str) -> StripeBilling | None:
        """The tenant's Stripe client, when it has a key and this intake reads Stripe."""
        if self.stripe is None:
            return None
        charging = self.dunning.store.hosted.get_hosted_charging(tenant)
        return None if charging is None else self.stripe.client(charging)

    def _closed(self, tenant: str, closed: InvoiceClosed) -> Acted:
        dunning = self.dunning
        invoice = dunning.store.get_invoice(tenant, closed.invoice_id)
        what = closed.reason.removeprefix("invoice_").replace("_", " ")
        if invoice is None:
            return Acted("not_in_dunning", f"the invoice ({what}) is not in dunning")
        if not invoice.state.is_final:
            invoice = dunning.stop(tenant, closed.invoice_id, reason=closed.reason)
            if invoice.state is InvoiceState.CANCELLED:
                return Acted(
                    "dunning_cancelled",
                    f"invoice {what}: dunning stopped, its open attempts cancelled",
                    [invoice],
                )
        return Acted(
            "already_final", f"invoice {what}; its dunning had ended ({invoice.state})", [invoice]
        )


def _about(reading: Reading | RenewalUpcoming) -> str | None:
    """What the event's record is about: its invoice, or its subscription."""
    match reading:
        case InvoiceFailed() | InvoicePaid() | InvoiceClosed():
            return reading.invoice_id
        case SubscriptionEnded():
            return reading.subscription_id
        case _:
            return None


__all__ = ["PROVIDER", "RETENTION", "EventInProgress", "IntakeAnswer", "StripeIntake"]
