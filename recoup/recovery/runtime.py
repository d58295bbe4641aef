"""Assembling the dunning runtime for a process: the `Dunning` service over a store, its job
handlers (attempts, deadlines, final actions, customers' emails) registered in a worker's
registry, and (on a virtual clock) a test clock."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp

from recoup.jobs.handlers import HandlerRegistry
from recoup.jobs.scheduler import Scheduler
from recoup.messages.channel import EmailChannel, SmtpServer
from recoup.recovery.attempts import AttemptRunner
from recoup.recovery.customers import register_customer_jobs
from recoup.recovery.emails import EmailSender
from recoup.recovery.hosted_charging import HostedCharger, StripeAccounts
from recoup.recovery.service import Dunning, RuntimeStore
from recoup.sealed import Box, NoSecretBox


def dunning_runtime(
    scheduler: Scheduler,
    store: RuntimeStore,
    registry: HandlerRegistry | None = None,
    *,
    http_session: Callable[[], aiohttp.ClientSession] | None = None,
    stripe: StripeAccounts | None = None,
    box: Box | None = None,
    email_channel: Callable[[SmtpServer], EmailChannel] | None = None,
) -> tuple[Dunning, HandlerRegistry]:
    """The service, and `registry` (a new one by default) with its handlers added. Redoes at
    once whatever a crash left undone (`Dunning.resync`). `http_session`: see `AttemptRunner`.
    `stripe`: the tenants' Stripe accounts, for the invoices Recoup charges through Stripe
    (without it, their attempts wait and say why). `box` opens the tenants' SMTP URLs (without
    it, their emails wait and say why); `email_channel` makes the channel to a server
    (default: `SmtpChannel`)."""
    dunning = Dunning(scheduler, store)
    hosted = None
    if stripe is not None:
        hosted = HostedCharger(store.hosted, stripe, now=scheduler.clock.now)
    runner = AttemptRunner(dunning, http_session=http_session, hosted=hosted)
    handlers = runner.register(registry or HandlerRegistry())
    register_customer_jobs(handlers, dunning)
    no_key = NoSecretBox("this process was given no key to open the tenants' SMTP URLs")
    EmailSender(dunning, box or no_key, channel_for=email_channel).register(handlers)
    dunning.resync()
    return dunning, handlers


__all__ = ["dunning_runtime"]
