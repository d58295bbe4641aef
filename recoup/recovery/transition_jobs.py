"""The jobs of a transition (`TransitionJobs`): what the lifecycle's commands and events
become, written in the transition's own unit of work.

Each command becomes a job with a deterministic id and idempotency key (an attempt, the
deadline), a cancellation, an email the events call for (`recovery.email_jobs`), a final
action at Stripe for an invoice charged there; each sendable event becomes a signed delivery
(`dispatch`). Every job is created through `Scheduler.insert_many_checked`, the one path all
jobs take, skipped if it exists already: doing this twice is harmless, which `resync`
(`recovery.resync`) relies on.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from recoup.dunning.invoice import Invoice, InvoiceEvent
from recoup.dunning.lifecycle import CancelAttempt, Command, ScheduleAttempt, ScheduleDeadline
from recoup.dunning.policy import DunningPolicy
from recoup.dunning.policy_flow import FlowLimit
from recoup.jobs.model import NewJob
from recoup.jobs.scheduler import Scheduler
from recoup.recovery.email_jobs import transition_emails
from recoup.recovery.hosted_store import STRIPE_CHARGE_TARGET
from recoup.recovery.job_specs import (
    PROVIDER_ACTIONS,
    attempt_job,
    deadline_job,
    event_job,
    final_action_job,
)
from recoup.recovery.policies import TenantPolicies
from recoup.recovery.runtime_store import RuntimeStore


class TransitionJobs:
    """`policies` and `event_url` read a tenant's policies and event URL (the runtime's
    settings); the jobs go through `scheduler` into `store`, its store."""

    def __init__(
        self,
        scheduler: Scheduler,
        store: RuntimeStore,
        *,
        policies: Callable[[str], TenantPolicies],
        event_url: Callable[[str], str | None],
    ) -> None:
        self.scheduler = scheduler
        self.store = store
        self.policies = policies
        self.event_url = event_url

    def carry_out(
        self,
        invoice: Invoice,
        commands: tuple[Command, ...],
        events: tuple[InvoiceEvent, ...],
        *,
        event_url: str | None,
        now: datetime,
        flow: FlowLimit | None = None,
        policy: DunningPolicy | None = None,
    ) -> None:
        """The jobs of a transition: the new ones in one insert (each skipped if it exists
        already: doing this twice is harmless), the cancellations, then its events (to
        `event_url`, the tenant's, read once with its policy; `policy`, the invoice's, when
        the caller has it, else read here)."""
        jobs = []
        for command in commands:
            match command:
                case ScheduleAttempt():
                    jobs.append(attempt_job(invoice, command.attempt.attempt, flow=flow))
                case CancelAttempt():
                    # An attempt already asked (in flight, or to be asked again after a
                    # retry or a crash) is left to finish: its charge may have gone through,
                    # and its answer must be heard (credited, or flagged).
                    self.store.cancel(invoice.tenant, command.attempt.job_id, now=now, begun=False)
                case ScheduleDeadline():
                    jobs.append(deadline_job(invoice, command.at))
        if invoice.charge_url == STRIPE_CHARGE_TARGET:
            jobs.extend(self._provider_actions(invoice, events, now=now))
        jobs.extend(self._emails(invoice, events, now=now, policy=policy))
        # Through the Scheduler's one bulk path, as every job is created: the targets were
        # checked before the unit began (the charge URL in `report_failure`, the event URL
        # when it was set), so nothing is resolved inside the transaction.
        self.scheduler.insert_many_checked(jobs, now=now)
        self.dispatch(list(events), urls={invoice.tenant: event_url}, now=now)

    def _emails(
        self,
        invoice: Invoice,
        events: tuple[InvoiceEvent, ...],
        *,
        now: datetime,
        policy: DunningPolicy | None,
    ) -> list[NewJob]:
        """The emails the events call for (`recovery.email_jobs`), by the invoice's policy."""
        if not events:
            return []
        if policy is None:
            policy = self.policies(invoice.tenant).for_invoice(invoice.policy)
        return transition_emails(self.store.messages, invoice, events, policy, now=now)

    def _provider_actions(
        self, invoice: Invoice, events: tuple[InvoiceEvent, ...], *, now: datetime
    ) -> list[NewJob]:
        """For an invoice charged through Stripe, the final action taken there when it is
        exhausted (marked uncollectible, subscription cancelled, collection paused), and the
        pause undone when it is recovered after one."""
        types = {e.type for e in events}
        action = invoice.final_action
        if "invoice.exhausted" in types and action in PROVIDER_ACTIONS:
            return [final_action_job(invoice, action, at=now)]
        if "invoice.recovered" in types and action == "pause_access":
            paused = final_action_job(invoice, "pause_access", at=now)
            if self.store.get(invoice.tenant, paused.id) is not None:
                return [final_action_job(invoice, "resume_access", at=now)]
        return []

    def dispatch(
        self,
        events: list[InvoiceEvent],
        *,
        urls: dict[str, str | None] | None = None,
        now: datetime,
    ) -> None:
        """Send the sendable events through durable jobs (they retry and keep run logs); the
        job's id is the event's, so the receiver sees one `webhook-id` per event. `urls`: the
        event URLs of tenants already known (the others are read)."""
        if not events:
            return
        urls = dict(urls or {})
        jobs = []
        for event in events:
            if not event.is_sent:
                continue
            if event.tenant not in urls:
                urls[event.tenant] = self.event_url(event.tenant)
            url = urls[event.tenant]
            if url is not None:
                jobs.append(event_job(event, url, now=now))
        self.scheduler.insert_many_checked(jobs, now=now)
        self.store.mark_events_dispatched([e.id for e in events], now=now)


__all__ = ["TransitionJobs"]
