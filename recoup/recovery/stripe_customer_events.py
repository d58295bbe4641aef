"""Stripe's customer-level events, acted on across the customer's invoices in dunning: a
subscription's end, a card update, an upcoming renewal (the invoice-level events, and the
claim that acts on each event once, are `recovery.stripe_intake`'s).

- a subscription cancelled (`customer.subscription.deleted`) or set to cancel → `stop` on
  each of the customer's open invoices (retrying or awaiting them) **of that subscription**:
  `dunning_cancelled`, the invoices listed (none: `not_in_dunning`). Recoup's invoice does not
  know its subscription: with the tenant's Stripe key, each open invoice of the customer is
  read at Stripe (`StripeBilling.subscription_of`, every one read before any is stopped) and
  those of another subscription keep their retries; without a key, every open invoice of the
  customer is stopped (give Recoup a key when customers hold several subscriptions). A Stripe
  read that fails raises: the event is released and Stripe delivers it again, rather than
  Recoup stopping some of its invoices and not others;
- a customer's card update → `payment_method_updated` on each of the customer's invoices that
  is retrying or awaiting them: `payment_method_updated` (none: `ignored`); it also cancels
  the customer's reminders it makes needless (`reminders_cancelled` when no invoice of theirs
  is open);
- an upcoming renewal (`invoice.upcoming`, `recovery.stripe_renewals`) → the renewal stored
  and its card_expiring reminder planned when the card will have expired by then
  (`recovery.renewals`): `renewal_recorded`.

`Acted`, what the intake did with one event before it is answered, lives here, the lower of
the intake's two modules, so that both build it without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from recoup.dunning.invoice import Invoice, InvoiceState
from recoup.recovery.service import Dunning
from recoup.recovery.store import InvoiceFilter
from recoup.recovery.stripe_events import CardUpdated, SubscriptionEnded
from recoup.recovery.stripe_renewals import RenewalUpcoming
from recoup.timekeeping.instants import format_utc

if TYPE_CHECKING:
    from recoup.payments.stripe_billing import StripeBilling

_OPEN_STATES = (InvoiceState.AWAITING_CUSTOMER, InvoiceState.RETRYING)


@dataclass
class Acted:
    """What the intake did with one event: its outcome, why, and the invoices it touched."""

    outcome: str
    detail: str
    invoices: list[Invoice] = field(default_factory=list)


class CustomerEvents:
    """The customer-level events of every tenant, acted on through `dunning`; `client(tenant)`
    gives the tenant's Stripe client when it has a key and the intake reads Stripe."""

    def __init__(self, dunning: Dunning, *, client: Callable[[str], StripeBilling | None]) -> None:
        self.dunning = dunning
        self.client = client

    def subscription_ended(self, tenant: str, ended: SubscriptionEnded) -> Acted:
        # Listed whole and, with a key, every one read at Stripe before any is stopped: a read
        # that fails raises (the event is released, Stripe delivers it again), never a part.
        waiting = list(self._open_invoices(tenant, ended.customer_id))
        client = self.client(tenant) if waiting else None
        if client is None:
            ours = waiting
            how = (
                "every open invoice of the customer (no Stripe key tells their subscriptions apart)"
            )
        else:
            of = {i.invoice_id: client.subscription_of(i.invoice_id) for i in waiting}
            ours = [i for i in waiting if of[i.invoice_id] == ended.subscription_id]
            others = len(waiting) - len(ours)
            how = f"its invoices, as Stripe says ({others} of the customer's other ones kept)"
        stopped = [
            self.dunning.stop(tenant, invoice.invoice_id, reason=ended.reason) for invoice in ours
        ]
        if not stopped:
            return Acted(
                "not_in_dunning",
                f"{ended.why}; no invoice of it is in dunning ({len(waiting)} of"
                f" {ended.customer_id} open)",
            )
        return Acted("dunning_cancelled", f"{ended.why}: dunning stopped for {how}", stopped)

    def card_updated(self, tenant: str, update: CardUpdated) -> Acted:
        dunning = self.dunning
        now = dunning.clock.now()
        reminders = dunning.store.atomically(
            lambda: dunning.reminders.card_updated(
                tenant,
                update.customer_id,
                exp_month=update.exp_month,
                exp_year=update.exp_year,
                now=now,
            )
        )
        cancelled = f"; {len(reminders)} card_expiring reminder(s) cancelled" if reminders else ""
        # Listed whole before any update: an update moves an invoice from awaiting the
        # customer to retrying, where a listing still to come would find it again.
        waiting = list(self._open_invoices(tenant, update.customer_id))
        updated = [
            dunning.payment_method_updated(tenant, invoice.invoice_id) for invoice in waiting
        ]
        if not updated:
            if reminders:
                return Acted("reminders_cancelled", f"{update.why}{cancelled}")
            return Acted(
                "ignored", f"{update.why}; no invoice of {update.customer_id} awaits a retry"
            )
        return Acted(
            "payment_method_updated", f"{update.why}: retries re-planned{cancelled}", updated
        )

    def upcoming(self, tenant: str, upcoming: RenewalUpcoming) -> Acted:
        """A renewal Stripe announces: stored, its card_expiring reminder planned or
        cancelled (`recovery.renewals`)."""
        report = upcoming.to_report()
        dunning = self.dunning
        now = dunning.clock.now()
        renewal, _ = dunning.store.atomically(
            lambda: dunning.reminders.tell(tenant, report, now=now)
        )
        detail = f"renewal {renewal.renewal_id} at {format_utc(renewal.renews_at)}: {renewal.state}"
        notes = "; ".join(upcoming.notes)
        return Acted("renewal_recorded", f"{detail}; {notes}" if notes else detail)

    def _open_invoices(self, tenant: str, customer_id: str) -> Iterator[Invoice]:
        for state in _OPEN_STATES:
            cursor: str | None = None
            while True:
                page = self.dunning.list_invoices(
                    InvoiceFilter(
                        tenant=tenant, state=state, customer_id=customer_id, cursor=cursor
                    )
                )
                yield from page.invoices
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor


__all__ = ["Acted", "CustomerEvents"]
