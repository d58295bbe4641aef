"""The dunning runtime's Python API: failures in, outcomes and payments in, jobs and events out.

The only place that joins `recoup.dunning` (what to do) and `recoup.jobs` (doing it later).
Every change of an invoice is one `change_invoice` around a pure transition (lock, re-check,
decide, write), and the jobs and events it commands are written in the same unit of work
(`atomically`: one transaction, which SQLite shares among the threads committing at the same
time). Each job has a deterministic id and idempotency key, so creating it twice is harmless;
`resync()` finds anything a transition left without its jobs (a store written otherwise) and
redoes it. An attempt job re-checks the invoice before it asks for a charge
(`recoup.recovery.attempts`): cancellation is a feature, the state check is the backstop.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from recoup.dunning.invoice import Invoice
from recoup.dunning.lifecycle import (
    AttemptReported,
    DeadlinePassed,
    DunningStopped,
    Message,
    Opening,
    PaidOutOfBand,
    PaymentMethodUpdated,
    ReportedOutcome,
    Transition,
    open_invoice,
    transition,
)
from recoup.dunning.policy import DunningPolicy
from recoup.errors import Conflict, InvalidInput, NotFound
from recoup.jobs.model import HttpTarget
from recoup.jobs.scheduler import Scheduler
from recoup.recovery.access_tracking import AccessTracker
from recoup.recovery.hosted_store import STRIPE_CHARGE_TARGET
from recoup.recovery.learning import TenantLearners
from recoup.recovery.policies import (
    DEFAULT_POLICY,
    TenantPolicies,
    check_settings,
    tenant_policies,
)
from recoup.recovery.records import KEEP, FailureReport, Keep, Timeline, given_or_kept
from recoup.recovery.renewals import Reminders
from recoup.recovery.resync import resync
from recoup.recovery.runtime_store import RuntimeStore
from recoup.recovery.store import (
    DunningSettings,
    InvoiceChange,
    InvoiceFilter,
    InvoicePage,
)
from recoup.recovery.transition_jobs import TransitionJobs
from recoup.timekeeping.clock import Clock
from recoup.timekeeping.instants import format_utc

CARD_HISTORY = timedelta(days=31)  # network limits count at most 30 days back
T = TypeVar("T")


class Dunning:
    """Failed charges of every tenant, over `scheduler`'s store (a `RuntimeStore`)."""

    def __init__(self, scheduler: Scheduler, store: RuntimeStore) -> None:
        self.scheduler = scheduler
        self.store = store
        # The customers' access follows every transition (`recovery.access_tracking`).
        self.access = AccessTracker(scheduler, store, self.policies)
        # Renewals and the card_expiring reminders a card update cancels (`recovery.renewals`).
        self.reminders = Reminders(scheduler, store, self.policies)
        self.learners = TenantLearners(store)  # adaptive policies' (`recovery.learning`)
        # What each transition's commands and events become (`recovery.transition_jobs`).
        self.jobs = TransitionJobs(
            scheduler,
            store,
            policies=self.policies,
            event_url=lambda tenant: self.settings(tenant).event_url,
        )

    @property
    def clock(self) -> Clock:
        return self.scheduler.clock

    # -- settings ----------------------------------------------------------------------------

    def settings(self, tenant: str) -> DunningSettings:
        found = self.store.get_settings(tenant)
        return found or DunningSettings(
            tenant=tenant,
            policy_toml=None,
            event_url=None,
            charge_url=None,
            updated_at=self.clock.now(),
        )

    def configure(
        self,
        tenant: str,
        *,
        policy_toml: str | Keep | None = KEEP,
        event_url: str | Keep | None = KEEP,
        charge_url: str | Keep | None = KEEP,
        experiment_name: str | Keep | None = KEEP,
        experiment_policy_toml: str | Keep | None = KEEP,
        experiment_share: float | Keep | None = KEEP,
    ) -> DunningSettings:
        """Set the tenant's settings: each one given replaces the stored one (None clears it),
        each one left out (`KEEP`) stays. What results is validated whole before anything is
        stored: an experiment needs all three of its settings (None for all three ends it)
        and two policies of distinct names."""
        for field, url in (("event_url", event_url), ("charge_url", charge_url)):
            if isinstance(url, str):
                self._check_url(field, url)
        current = self.settings(tenant)
        pick = given_or_kept
        wanted = DunningSettings(
            tenant=tenant,
            policy_toml=pick(policy_toml, current.policy_toml),
            event_url=pick(event_url, current.event_url),
            charge_url=pick(charge_url, current.charge_url),
            updated_at=self.clock.now(),
            experiment_name=pick(experiment_name, current.experiment_name),
            experiment_policy_toml=pick(experiment_policy_toml, current.experiment_policy_toml),
            experiment_share=pick(experiment_share, current.experiment_share),
        )
        check_settings(wanted)
        return self.store.put_settings(wanted)

    def policy(self, tenant: str) -> DunningPolicy:
        """The tenant's own policy (arm a of an experiment)."""
        return self.policies(tenant).a

    def policies(self, tenant: str) -> TenantPolicies:
        """The tenant's policy and, during an experiment, the second one."""
        return tenant_policies(self.settings(tenant))

    def _default_charge_target(self, tenant: str, settings: DunningSettings) -> str | None:
        """Where a new invoice of the tenant is charged: through Stripe by Recoup itself when
        the tenant charges with Stripe, else at the tenant's charge endpoint."""
        if self.store.hosted.get_hosted_charging(tenant) is not None:
            return STRIPE_CHARGE_TARGET
        return settings.charge_url

    def _check_target(self, tenant: str, target: str) -> None:
        if target != STRIPE_CHARGE_TARGET:
            self._check_url("charge_url", target)
        elif self.store.hosted.get_hosted_charging(tenant) is None:
            raise InvalidInput(
                "charge_url",
                target,
                "expected a URL: the tenant does not charge with Stripe (--charge-with stripe)",
            )

    def _check_url(self, field: str, url: str) -> None:
        try:
            self.scheduler.check_target(HttpTarget(url=url))
        except InvalidInput as exc:
            raise InvalidInput(field, url, exc.allowed) from None

    # -- failures in -------------------------------------------------------------------------

    def report_failure(self, tenant: str, report: FailureReport) -> tuple[Invoice, bool]:
        """Plan the failure and schedule every planned attempt → (invoice, True). The same
        failure again → (the stored invoice, False), nothing changed; another failure of an
        invoice already known → `Conflict` naming it. The contact details it carries are
        stored on the customer either way (a replay may bring a corrected address)."""
        existing = self.store.get_invoice(tenant, report.invoice_id)
        if existing is not None:
            found = self._same_or_conflict(report, existing)
            self._remember_customer(tenant, report)
            return found, False
        settings = self.settings(tenant)
        charge_url = report.charge_url or self._default_charge_target(tenant, settings)
        if charge_url is None:
            raise InvalidInput(
                "charge_url",
                None,
                "expected the retry-charge endpoint's URL (the tenant has no default: set one "
                "with PUT /v1/dunning/settings, or charge with Stripe: --charge-with stripe)",
            )
        self._check_target(tenant, charge_url)
        # The invoice's arm, when an experiment runs; the invoice records its policy's name.
        # Read once: the unit below takes these rather than reading the settings again.
        policies = tenant_policies(settings)
        policy = policies.for_new_invoice(report.invoice_id)
        # The report is the opening's failure as it is (`dunning.failure.ChargeFailure`).
        opening = Opening(tenant=tenant, failure=report, charge_url=charge_url, policy=policy)
        history = self._history(tenant, report.card_fingerprint, report.failed_at)
        decision = self.learners.plan(tenant, opening, history)
        now = self.clock.now()
        invoice, first = open_invoice(opening, decision, now=now)

        def create() -> tuple[Invoice, bool]:
            self._remember_customer(tenant, report)
            raced = self.store.get_invoice(tenant, report.invoice_id)
            if raced is not None:  # reported meanwhile: its access is followed already
                return raced, False
            opened = self.access.follow(first, seq=0, now=now, policies=policies)
            stored, created = self.store.create_invoice(invoice, opened.events)
            if created:
                self.jobs.carry_out(
                    stored,
                    opened.commands,
                    opened.events,
                    event_url=settings.event_url,
                    now=now,
                    flow=policy.flow,
                    policy=policy,
                )
            return stored, created

        stored, created = self.store.atomically(create)
        if not created:  # a concurrent report of the same invoice won
            return self._same_or_conflict(report, stored), False
        return stored, True

    def _remember_customer(self, tenant: str, report: FailureReport) -> None:
        self.store.customers.put_customer(
            tenant,
            report.customer_id,
            email=report.customer_email,
            name=report.customer_name,
            locale=report.locale,
            at=self.clock.now(),
        )

    @staticmethod
    def _same_or_conflict(report: FailureReport, existing: Invoice) -> Invoice:
        if report.same_failure(existing):
            return existing
        raise Conflict(
            f"invoice {report.invoice_id!r} is already in dunning (state {existing.state}, "
            f"opened by the failure at {format_utc(existing.failed_at)}); a new failure needs "
            "a new invoice id"
        )

    def _history(self, tenant: str, card: str | None, at: datetime) -> list[Any]:
        if not card:
            return []
        return self.store.card_history(tenant, card, since=at - CARD_HISTORY)

    # -- messages in -------------------------------------------------------------------------

    def report_outcome(
        self,
        tenant: str,
        invoice_id: str,
        attempt: int,
        outcome: ReportedOutcome,
        *,
        decline_code: str | None = None,
        advice_code: str | None = None,
        detail: str | None = None,
        seen: Invoice | None = None,
    ) -> Invoice:
        """`seen`: the invoice as the caller last read it, if it did (see `apply`)."""
        message = AttemptReported(
            attempt=attempt,
            outcome=outcome,
            at=self.clock.now(),
            decline_code=decline_code,
            advice_code=advice_code,
            detail=detail,
        )
        return self.apply(tenant, invoice_id, message, seen=seen)

    def mark_paid(self, tenant: str, invoice_id: str) -> Invoice:
        return self.apply(tenant, invoice_id, PaidOutOfBand(at=self.clock.now()))

    def payment_method_updated(self, tenant: str, invoice_id: str) -> Invoice:
        """The invoice's retries re-planned on the new card, and its customer's renewal
        reminders the new card makes needless cancelled."""
        updated = self.apply(tenant, invoice_id, PaymentMethodUpdated(at=self.clock.now()))
        now = self.clock.now()
        self.store.atomically(
            lambda: self.reminders.card_updated(tenant, updated.customer_id, now=now)
        )
        return updated

    def deadline(self, tenant: str, invoice_id: str) -> Invoice:
        return self.apply(tenant, invoice_id, DeadlinePassed(at=self.clock.now()))

    def stop(self, tenant: str, invoice_id: str, *, reason: str) -> Invoice:
        """Stop dunning the invoice without a payment (`invoice.dunning_cancelled`): nothing
        is charged for it again. An invoice already recovered, exhausted or stopped is left as
        it is (returned unchanged)."""
        return self.apply(tenant, invoice_id, DunningStopped(at=self.clock.now(), reason=reason))

    def apply(
        self, tenant: str, invoice_id: str, message: Message, *, seen: Invoice | None = None
    ) -> Invoice:
        """One transition under the invoice's row lock and the jobs it commands, in one unit
        of work. The unit may run on another thread (SQLite's group commit): it reads no
        clock, `now` is taken here. `seen` (the invoice as the caller read it) spares a read
        before the lock: only its policy and card are used there, which never change; the
        transition itself works on the invoice read under the lock."""
        now = self.clock.now()
        if seen is not None and (seen.tenant, seen.invoice_id) != (tenant, invoice_id):
            raise InvalidInput("seen", seen.invoice_id, f"expected invoice {invoice_id!r}")
        current = seen if seen is not None else self.get(tenant, invoice_id)
        settings = self.settings(tenant)
        policies = tenant_policies(settings)  # read once: the unit takes them
        policy = policies.for_invoice(current.policy)
        history = self._history(tenant, current.card_fingerprint, now)
        planning = self.learners.planning(tenant, current.customer_id, policy, history, message)
        done: list[Transition] = []  # what `change` decided under the lock

        def change(invoice: Invoice) -> InvoiceChange | None:
            seq = self.store.event_count(tenant, invoice_id)
            found = transition(invoice, message, planning, seq=seq, now=now)
            if found is None:
                return None
            found = self.access.follow(found, seq=seq, now=now, policies=policies)
            done.append(found)
            return InvoiceChange(invoice=found.invoice, events=found.events)

        def unit() -> Transition | None:
            if self.store.change_invoice(tenant, invoice_id, change) is None:
                return None
            t = done[-1]
            self.jobs.carry_out(
                t.invoice,
                t.commands,
                t.events,
                event_url=settings.event_url,
                now=now,
                flow=policy.flow,
                policy=policy,
            )
            return t

        changed = self.store.atomically(unit)
        return self.get(tenant, invoice_id) if changed is None else changed.invoice

    def recheck_access(self, tenant: str, invoice_id: str) -> Invoice | None:
        """At the end of the invoice's grace period: its customer's access as it now is, with
        a `customer.access_changed` event on the invoice if it changed (sent like its other
        events). None: the invoice is gone."""
        now = self.clock.now()
        settings = self.settings(tenant)
        policies = tenant_policies(settings)

        def change(invoice: Invoice) -> InvoiceChange | None:
            seq = self.store.event_count(tenant, invoice_id)
            event = self.access.recheck(invoice, seq=seq, now=now, policies=policies)
            if event is None:
                return None
            noted = replace(invoice, version=invoice.version + 1, updated_at=now)
            return InvoiceChange(invoice=noted, events=(event,))

        def unit() -> InvoiceChange | None:
            changed = self.store.change_invoice(tenant, invoice_id, change)
            if changed is not None:
                self.jobs.dispatch(list(changed.events), urls={tenant: settings.event_url}, now=now)
            return changed

        self.store.atomically(unit)
        return self.store.get_invoice(tenant, invoice_id)

    # -- reading -----------------------------------------------------------------------------

    def get(self, tenant: str, invoice_id: str) -> Invoice:
        found = self.store.get_invoice(tenant, invoice_id)
        if found is None:
            raise NotFound(f"no invoice {invoice_id!r} in dunning")
        return found

    def timeline(self, tenant: str, invoice_id: str) -> Timeline:
        invoice = self.get(tenant, invoice_id)
        runs = {a.attempt: self.store.runs(tenant, a.job_id) for a in invoice.attempts}
        emails = self.store.messages.invoice_emails(tenant, invoice_id)
        email_runs = {e.key: self.store.runs(tenant, e.job_id) for e in emails if e.job_id}
        return Timeline(
            invoice=invoice,
            events=self.store.invoice_events(tenant, invoice_id),
            runs=runs,
            emails=emails,
            email_runs=email_runs,
        )

    def list_invoices(self, query: InvoiceFilter) -> InvoicePage:
        return self.store.list_invoices(query)

    # -- jobs out ----------------------------------------------------------------------------

    def resync(self, *, limit: int = 500) -> int:
        """Redo what a crash between a transition and its jobs left undone; how many things
        it fixed (`recovery.resync`). Safe to run at any time, from any process."""
        return resync(self, limit=limit)


__all__ = ["DEFAULT_POLICY", "Dunning", "RuntimeStore"]
