"""Upcoming renewals and the reminder sent before a card runs out (pre-dunning).

A tenant tells Recoup of a renewal (`POST /v1/dunning/renewals`, Stripe's `invoice.upcoming`
through the intake): `Reminders.tell` stores it under an id derived from the customer and the
instant (told twice: one renewal, its card and amount the latest told), stores the customer's
address, and when the card will have expired by the renewal's local date, plans the
`card_expiring` email (`messages.planning.card_expiry_reminder`: the policy's
`card_expiry_days_before` days ahead, in the customer's daytime window; told fewer days
ahead, in the next daytime if that is still before the renewal) as an email job
(`recovery.email_jobs.email_job`, its ledger row planned, the job created through
`Scheduler.insert_many_checked` as every job is), in one unit of work. Nothing is
planned while the tenant sends no emails (no SMTP server), or for a renewal already past.

The reminder is cancelled when the card is updated first: a payment-method update reported
for the customer or for one of their invoices, Stripe's `payment_method.*_updated` and
`customer.updated` with a new default method, or the renewal told again with a card valid
then (`card_updated`). A new card whose expiry is known and still falls before the renewal
leaves the reminder as it is. A reminder already sent, or being sent, is left as it is (its
job is cancelled only if no worker has claimed it; the renewal stays `reminder_scheduled`). A
cancelled reminder is not planned again for the same renewal: its email key is the renewal's,
and Recoup never sends one key twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from recoup.dunning.invoice import ID_NAMESPACE
from recoup.errors import Conflict, InvalidInput
from recoup.jobs.model import JobState
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.store import JobStore
from recoup.messages.planning import PlannedMessage, card_expiry_reminder, daytime
from recoup.recovery.contacts import display_name, email_address, locale_tag
from recoup.recovery.customer_store import CustomerStore, Renewal, RenewalState
from recoup.recovery.email_jobs import email_job, planned_row
from recoup.recovery.email_store import MessageStore
from recoup.recovery.policies import TenantPolicies
from recoup.recovery.records import MAX_ID_LENGTH
from recoup.timekeeping.instants import format_utc, to_utc
from recoup.timekeeping.zones import zone

MIN_EXP_YEAR, MAX_EXP_YEAR = 2000, 2200  # as `card_expiry_reminder` takes them
MAX_AMOUNT = 10**15  # minor units, as a failure's


def renewal_id(tenant: str, customer_id: str, renews_at: datetime) -> str:
    """The id of the customer's renewal at `renews_at`: the same renewal told twice is one."""
    key = f"renewal\x00{tenant}\x00{customer_id}\x00{format_utc(renews_at)}"
    return str(uuid.uuid5(ID_NAMESPACE, key))


@dataclass(frozen=True, kw_only=True)
class RenewalReport:
    """An upcoming renewal as a tenant tells it, checked as it is made (`InvalidInput`
    naming the field). The card's expiry: both parts or neither (unknown: no reminder)."""

    customer_id: str
    renews_at: datetime
    amount: int  # minor units
    currency: str
    timezone: str
    exp_month: int | None = None
    exp_year: int | None = None
    customer_email: str | None = None
    customer_name: str | None = None
    locale: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= len(self.customer_id) <= MAX_ID_LENGTH or "\x00" in self.customer_id:
            raise InvalidInput(
                "customer_id", self.customer_id, f"expected 1–{MAX_ID_LENGTH} characters"
            )
        object.__setattr__(self, "renews_at", to_utc("renews_at", self.renews_at))
        if isinstance(self.amount, bool) or not 0 <= self.amount <= MAX_AMOUNT:
            raise InvalidInput("amount", self.amount, "expected an integer ≥ 0 (minor units)")
        if len(self.currency) != 3 or not self.currency.isascii() or not self.currency.isalpha():
            raise InvalidInput("currency", self.currency, "expected an ISO 4217 code such as usd")
        object.__setattr__(self, "currency", self.currency.lower())
        zone(self.timezone)  # UnknownTimeZone names `timezone`
        if (self.exp_month is None) != (self.exp_year is None):
            raise InvalidInput(
                "card", {"exp_month": self.exp_month, "exp_year": self.exp_year}, "expected both"
            )
        if self.exp_month is not None and not 1 <= self.exp_month <= 12:
            raise InvalidInput("card.exp_month", self.exp_month, "expected a month from 1 to 12")
        if self.exp_year is not None and not MIN_EXP_YEAR <= self.exp_year <= MAX_EXP_YEAR:
            raise InvalidInput(
                "card.exp_year",
                self.exp_year,
                f"expected a four-digit year from {MIN_EXP_YEAR} to {MAX_EXP_YEAR}",
            )
        if self.customer_email is not None:
            object.__setattr__(self, "customer_email", email_address(self.customer_email))
        if self.customer_name is not None:
            object.__setattr__(self, "customer_name", display_name(self.customer_name))
        if self.locale is not None:
            object.__setattr__(self, "locale", locale_tag(self.locale))


class ReminderStore(JobStore, Protocol):
    """What renewals need of the store: customers and renewals, the email ledger, jobs to
    cancel (they are created through the scheduler)."""

    @property
    def customers(self) -> CustomerStore: ...

    @property
    def messages(self) -> MessageStore: ...


class Reminders:
    """The renewals of every tenant and their card_expiring reminders, over `store`, the jobs
    created through `scheduler`; `policies(tenant)` gives the tenant's policy (its
    `[messages]` table: whether and when)."""

    def __init__(
        self,
        scheduler: Scheduler,
        store: ReminderStore,
        policies: Callable[[str], TenantPolicies],
    ) -> None:
        self.scheduler = scheduler
        self.store = store
        self.policies = policies

    def tell(self, tenant: str, report: RenewalReport, *, now: datetime) -> tuple[Renewal, bool]:
        """Store the renewal (True: a new one) and plan or cancel its reminder (the module
        docstring). Run it inside a unit of work (`store.atomically`)."""
        customers = self.store.customers
        customers.put_customer(
            tenant,
            report.customer_id,
            email=report.customer_email,
            name=report.customer_name,
            locale=report.locale,
            at=now,
        )
        rid = renewal_id(tenant, report.customer_id, report.renews_at)
        existing = customers.get_renewal(tenant, rid)
        renewal = Renewal(
            tenant=tenant,
            renewal_id=rid,
            customer_id=report.customer_id,
            renews_at=report.renews_at,
            amount=report.amount,
            currency=report.currency,
            timezone=report.timezone,
            exp_month=report.exp_month,
            exp_year=report.exp_year,
            state=RenewalState.NO_REMINDER,
            created_at=existing.created_at if existing is not None else now,
            updated_at=now,
            reminder_job_id=existing.reminder_job_id if existing is not None else None,
        )
        if existing is not None and existing.state is not RenewalState.NO_REMINDER:
            renewal = replace(renewal, state=existing.state)
        planned = self._reminder(renewal, now=now)
        if planned is not None and renewal.state is RenewalState.NO_REMINDER:
            job = email_job(planned)
            self.store.messages.plan_email(planned_row(planned, now=now))
            # Inside the caller's unit of work: its target is a handler, nothing to resolve.
            inserted = self.scheduler.insert_many_checked([job], now=now)
            if not inserted and self.store.get(tenant, job.id) is None:
                # Skipped for a live job holding its name: never a renewal pointing at no job.
                raise Conflict(f"job name {job.name!r} is taken by a live job")
            renewal = replace(
                renewal, state=RenewalState.REMINDER_SCHEDULED, reminder_job_id=job.id
            )
        elif planned is None and renewal.state is RenewalState.REMINDER_SCHEDULED:
            renewal = self._cancelled(renewal, now=now) or renewal
        return customers.put_renewal(renewal)

    def card_updated(
        self,
        tenant: str,
        customer_id: str,
        *,
        exp_month: int | None = None,
        exp_year: int | None = None,
        now: datetime,
    ) -> list[Renewal]:
        """The customer's card was updated (its new expiry, when known): every scheduled
        reminder the new card makes needless is cancelled; returns those renewals."""
        cancelled = []
        customers = self.store.customers
        for renewal in customers.customer_renewals(
            tenant, customer_id, state=RenewalState.REMINDER_SCHEDULED
        ):
            if exp_month is not None and exp_year is not None:
                renewal = replace(renewal, exp_month=exp_month, exp_year=exp_year)
                if self._reminder(renewal, now=now) is not None:
                    customers.put_renewal(replace(renewal, updated_at=now))
                    continue  # the new card runs out before the renewal too
            gone = self._cancelled(renewal, now=now)
            if gone is not None:
                stored, _ = customers.put_renewal(gone)
                cancelled.append(stored)
        return cancelled

    def _reminder(self, renewal: Renewal, *, now: datetime) -> PlannedMessage | None:
        """The reminder the renewal calls for now, or None: the card is valid then (or not
        known), the renewal is past, the policy sends none, the tenant sends no email."""
        if renewal.exp_month is None or renewal.exp_year is None or renewal.renews_at <= now:
            return None
        settings = self.store.messages.get_message_settings(renewal.tenant)
        if settings is None or not settings.sends:
            return None
        policy = self.policies(renewal.tenant).a.messages
        planned = card_expiry_reminder(
            tenant=renewal.tenant,
            renewal_id=renewal.renewal_id,
            customer_id=renewal.customer_id,
            renews_at=renewal.renews_at,
            timezone=renewal.timezone,
            exp_month=renewal.exp_month,
            exp_year=renewal.exp_year,
            policy=policy,
            data={"amount": renewal.amount, "currency": renewal.currency},
        )
        if planned is None or planned.send_at >= now:
            return planned
        # Told fewer days ahead than the policy's: as soon as the customer's daytime allows,
        # never at night, and only if that is still before the renewal.
        soonest = daytime(now, renewal.timezone, policy.window_start, policy.window_end)
        return replace(planned, send_at=soonest) if soonest < renewal.renews_at else None

    def _cancelled(self, renewal: Renewal, *, now: datetime) -> Renewal | None:
        """The renewal with its reminder cancelled; None when it is too late (the email went
        out, or is going: a job a worker has claimed is left to finish)."""
        if renewal.reminder_job_id is not None:
            job = self.store.cancel(renewal.tenant, renewal.reminder_job_id, now=now, begun=False)
            if job is not None and job.state is not JobState.CANCELLED:
                return None
        return replace(renewal, state=RenewalState.REMINDER_CANCELLED, updated_at=now)


__all__ = [
    "MAX_EXP_YEAR",
    "MIN_EXP_YEAR",
    "ReminderStore",
    "Reminders",
    "RenewalReport",
    "renewal_id",
]
