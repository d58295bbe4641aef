"""Assembling the dunning runtime for a process: the `Dunning` service over a store, its job
handlers registered in a worker's registry, and (on a virtual clock) a test clock."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp

from recoup.jobs.handlers import HandlerRegistry
from recoup.jobs.scheduler import Scheduler
from recoup.recovery.attempts import AttemptRunner
from recoup.recovery.customers import register_customer_jobs
from recoup.recovery.hosted_charging import HostedCharger, StripeAccounts
from recoup.recovery.service import Dunning, RuntimeStore


def dunning_runtime(
    scheduler: Scheduler,
    store: RuntimeStore,
    registry: HandlerRegistry | None = None,
    *,
    http_session: Callable[[], aiohttp.ClientSession] | None = None,
    stripe: StripeAccounts | None = None,
) -> tuple[Dunning, HandlerRegistry]:
    """The service, and `registry` (a new one by default) with its handlers added. Redoes at
    once whatever a crash left undone (`Dunning.resync`). `http_session`: see `AttemptRunner`.
    `stripe`: the tenants' Stripe accounts, for the invoices Recoup charges through Stripe
    (without it, their attempts wait and say why)."""
    dunning = Dunning(scheduler, store)
    hosted = None
    if stripe is not None:
        hosted = HostedCharger(store.hosted, stripe, now=scheduler.clock.now)
    runner = AttemptRunner(dunning, http_session=http_session, hosted=hosted)
    handlers = runner.register(registry or HandlerRegistry())
    register_customer_jobs(handlers, dunning)
    dunning.resync()
    return dunning, handlers


__all__ = ["dunning_runtime"]
