"""Dunning under a disabled tenant: nothing is charged while it is disabled (its attempts are
held, and one claimed just before the disable asks nothing), and the plan resumes once it is
enabled."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import aiohttp
import pytest

from recoup.dunning.invoice import AttemptState, InvoiceState
from recoup.jobs.handlers import HandlerContext
from recoup.jobs.model import JobState
from recoup.recovery.attempts import AskAgain, AttemptRunner
from tests.recovery.conftest import Runtime

DAY = timedelta(days=1)


def test_no_charge_while_disabled_and_the_plan_resumes_once_enabled(runtime: Runtime) -> None:
    invoice = runtime.fail("inv_1", "fp_ok")
    # The store's own switch: `default` is refused by recoup.tenancy (it is the embedded
    # tenant), but the dunning runtime here runs on it.
    runtime.store.set_tenant_disabled("default", disabled=True, now=runtime.clock.now())
    runtime.advance(30 * DAY)
    assert runtime.side.requests == []
    assert runtime.side.gateway.total_charged("inv_1") == 0
    first = runtime.store.get("default", invoice.attempts[0].job_id)
    assert first.state is JobState.SCHEDULED and first.attempts == 0

    runtime.store.set_tenant_disabled("default", disabled=False, now=runtime.clock.now())
    runtime.advance(timedelta(minutes=1))
    # Every attempt was overdue: they are released together, and the charge endpoint's lock
    # on the invoice lets one of them charge; the others find it paid.
    charges = runtime.side.gateway.charges_per_key()
    assert list(charges.values()) == [1], charges
    after = runtime.invoice("inv_1")
    assert after.state is InvoiceState.RECOVERED
    assert [a.state for a in after.attempts].count(AttemptState.SUCCEEDED) == 1


def test_an_attempt_claimed_before_the_disable_asks_nothing(runtime: Runtime) -> None:
    invoice = runtime.fail("inv_1", "fp_ok")
    runtime.clock.set(invoice.attempts[0].at)
    job = runtime.store.get("default", invoice.attempts[0].job_id)
    ctx = HandlerContext(
        job_id=job.id,
        tenant="default",
        name=job.name,
        attempt=1,
        payload=job.payload,
        idempotency_key=job.idempotency_key,
        run_at=job.run_at,
    )
    runtime.store.set_tenant_disabled("default", disabled=True, now=runtime.clock.now())
    runner = AttemptRunner(runtime.dunning, http_session=aiohttp.ClientSession)
    with pytest.raises(AskAgain, match="disabled"):
        asyncio.run(runner.attempt(ctx))
    assert runtime.side.requests == []
    assert runtime.side.gateway.total_charged("inv_1") == 0
