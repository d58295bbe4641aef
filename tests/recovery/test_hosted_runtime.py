"""Hosted charging in the dunning runtime, on both backends: the charge target `stripe:` chosen
at a failure, the attempt handler for an invoice charged through Stripe, and the final-action
jobs (one per exhausted invoice, a resume after a recovery that follows a pause) with their
handler against a recording server answering as Stripe."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.dunning.invoice import Invoice, InvoiceState, job_group
from recoup.errors import InvalidInput
from recoup.jobs.handlers import HandlerContext, PermanentError
from recoup.jobs.model import Job, PythonTarget
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import JobFilter
from recoup.recovery.attempts import AskAgain, AttemptRunner
from recoup.recovery.hosted_charging import HostedCharger, StripeAccounts
from recoup.recovery.hosted_store import STRIPE_CHARGE_TARGET, HostedCharging
from recoup.recovery.job_specs import ATTEMPT_HANDLER, FINAL_ACTION_HANDLER, final_action_job
from recoup.recovery.records import FailureReport
from recoup.recovery.service import Dunning
from recoup.sealed import SecretBox
from recoup.timekeeping.clock import VirtualClock
from tests.storage.conftest import Store
from tests.support_stripe import TEST_KEY, RecordingStripe, stripe_invoice, stripe_subscription

START = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)  # a Tuesday
TENANT = "default"
BOX = SecretBox([os.environ["RECOUP_SECRET_KEY"]])


def policy(final_action: str) -> str:
    """One attempt a day after the failure, then `final_action`."""
    return f"""
name = "one-{final_action.replace("_", "-")}"
final_action = "{final_action}"
gaps = [{{ days = 1 }}]

[window]
start = "10:00"
jitter_minutes = 0
"""


@dataclass
class Hosted:
    clock: VirtualClock
    store: Store
    dunning: Dunning
    runner: AttemptRunner
    stripe: RecordingStripe

    def charge_with_stripe(self) -> None:
        self.store.hosted.put_hosted_charging(
            HostedCharging(
                tenant=TENANT, provider="stripe", api_key=BOX.seal(TEST_KEY), updated_at=START
            )
        )

    def fail(self, invoice_id: str, *, charge_url: str | None = None) -> Invoice:
        invoice, created = self.dunning.report_failure(
            TENANT,
            FailureReport(
                invoice_id=invoice_id,
                customer_id=f"cus_{invoice_id}",
                amount=1999,
                currency="usd",
                failed_at=START,
                timezone="America/Chicago",
                country="US",
                decline_code="insufficient_funds",
                charge_url=charge_url,
            ),
        )
        assert created
        return invoice

    def exhaust(self, invoice_id: str, final_action: str, **fail: Any) -> Invoice:
        self.dunning.configure(TENANT, policy_toml=policy(final_action))
        self.fail(invoice_id, **fail)
        exhausted = self.dunning.report_outcome(
            TENANT, invoice_id, 1, "failed", decline_code="insufficient_funds"
        )
        assert exhausted.state is InvoiceState.EXHAUSTED
        return exhausted

    def jobs(self, invoice_id: str, handler: str = FINAL_ACTION_HANDLER) -> list[Job]:
        page = self.store.list_jobs(JobFilter(tenant=TENANT, group=job_group(invoice_id)))
        return [
            j
            for j in page.jobs
            if isinstance(j.target, PythonTarget) and j.target.handler == handler
        ]

    def run(self, job: Job, handler: str, *, attempt: int = 1) -> str:
        ctx = HandlerContext(
            job_id=job.id,
            tenant=TENANT,
            name=job.name,
            attempt=attempt,
            payload=job.payload,
            idempotency_key=job.idempotency_key,
            run_at=job.run_at,
        )
        call = self.runner.final_action if handler == FINAL_ACTION_HANDLER else self.runner.attempt
        result: str = asyncio.run(call(ctx))
        return result


@pytest.fixture
def hosted(store: Store) -> Iterator[Hosted]:
    clock = VirtualClock(START)
    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    scheduler.default_tenant()
    dunning = Dunning(scheduler, store)
    dunning.configure(
        TENANT, charge_url="http://127.0.0.1:9/charge", policy_toml=policy("leave_past_due")
    )
    with RecordingStripe() as stripe:
        accounts = StripeAccounts(BOX, api_base=stripe.url, timeout=10.0)
        runner = AttemptRunner(dunning, hosted=HostedCharger(store.hosted, accounts, now=clock.now))
        try:
            yield Hosted(clock, store, dunning, runner, stripe)
        finally:
            accounts.close()


# The charge target


def test_a_tenant_charging_with_stripe_gets_invoices_charged_at_stripe(hosted: Hosted) -> None:
    before = hosted.fail("in_url")
    hosted.charge_with_stripe()
    after = hosted.fail("in_stripe")

    assert before.charge_url == "http://127.0.0.1:9/charge"
    assert after.charge_url == STRIPE_CHARGE_TARGET


def test_a_failure_naming_stripe_for_a_tenant_without_hosted_charging_is_refused(
    hosted: Hosted,
) -> None:
    with pytest.raises(InvalidInput) as raised:
        hosted.fail("in_1", charge_url=STRIPE_CHARGE_TARGET)

    assert raised.value.field == "charge_url"
    assert "--charge-with stripe" in str(raised.value)
    assert hosted.store.get_invoice(TENANT, "in_1") is None


def test_an_attempt_charged_at_stripe_pays_the_invoice_and_recovers_it(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    invoice = hosted.fail("in_1")
    hosted.stripe.on("GET", "/v1/invoices/in_1", (200, stripe_invoice("in_1")))
    hosted.stripe.on("POST", "/v1/invoices/in_1/pay", (200, stripe_invoice("in_1", "paid")))
    [job] = hosted.jobs("in_1", ATTEMPT_HANDLER)
    hosted.clock.set(invoice.attempts[0].at)

    said = hosted.run(job, ATTEMPT_HANDLER)

    assert said.startswith("stripe: succeeded")
    assert hosted.dunning.get(TENANT, "in_1").state is InvoiceState.RECOVERED
    [pay] = hosted.stripe.sent("POST")
    assert (pay.path, pay.idempotency_key) == ("/v1/invoices/in_1/pay", "charge:in_1:1")


def test_an_attempt_at_stripe_without_hosted_charging_asks_again_naming_the_fix(
    hosted: Hosted,
) -> None:
    hosted.charge_with_stripe()
    hosted.fail("in_1")
    hosted.store.hosted.delete_hosted_charging(TENANT)
    [job] = hosted.jobs("in_1", ATTEMPT_HANDLER)

    with pytest.raises(AskAgain, match=r"--charge-with stripe --stripe-api-key-file"):
        hosted.run(job, ATTEMPT_HANDLER)

    assert hosted.stripe.requests == []
    found = hosted.dunning.get(TENANT, "in_1")
    assert found.state is InvoiceState.RETRYING  # nothing reported: the job retries


def test_an_attempt_at_stripe_in_a_process_without_stripe_access_asks_again(
    hosted: Hosted,
) -> None:
    hosted.charge_with_stripe()
    hosted.fail("in_1")
    [job] = hosted.jobs("in_1", ATTEMPT_HANDLER)
    hosted.runner.hosted = None

    with pytest.raises(AskAgain, match="no Stripe access"):
        hosted.run(job, ATTEMPT_HANDLER)


# Final actions


@pytest.mark.parametrize("action", ["cancel", "mark_uncollectible", "pause_access"])
def test_an_exhausted_invoice_charged_at_stripe_gets_one_final_action_job(
    hosted: Hosted, action: str
) -> None:
    hosted.charge_with_stripe()
    exhausted = hosted.exhaust("in_1", action)
    # The same transition carried out again (a resync, a retried unit of work): still one.
    events = tuple(hosted.store.invoice_events(TENANT, "in_1"))
    hosted.dunning.jobs.carry_out(exhausted, (), events, event_url=None, now=hosted.clock.now())

    [job] = hosted.jobs("in_1")
    assert job.id == final_action_job(exhausted, action, at=START).id
    assert job.payload == {"invoice_id": "in_1", "action": action}
    assert job.idempotency_key == f"final:in_1:{action}"


def test_leave_past_due_and_an_invoice_charged_at_a_url_get_no_final_action(
    hosted: Hosted,
) -> None:
    hosted.exhaust("in_url", "cancel")  # charged at the tenant's endpoint
    hosted.charge_with_stripe()
    hosted.exhaust("in_left", "leave_past_due")

    assert hosted.jobs("in_url") == []
    assert hosted.jobs("in_left") == []


def test_a_recovery_after_a_pause_schedules_one_resume(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    exhausted = hosted.exhaust("in_1", "pause_access")
    hosted.dunning.mark_paid(TENANT, "in_1")
    hosted.dunning.mark_paid(TENANT, "in_1")  # a repeat changes nothing

    jobs = hosted.jobs("in_1")
    assert sorted(j.payload["action"] for j in jobs) == ["pause_access", "resume_access"]
    resume = next(j for j in jobs if j.payload["action"] == "resume_access")
    assert resume.id == final_action_job(exhausted, "resume_access", at=START).id


def test_a_recovery_without_a_pause_schedules_no_resume(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    hosted.exhaust("in_1", "cancel")
    hosted.dunning.mark_paid(TENANT, "in_1")

    assert [j.payload["action"] for j in hosted.jobs("in_1")] == ["cancel"]


def final_job(hosted: Hosted, invoice_id: str, action: str) -> Job:
    [job] = [j for j in hosted.jobs(invoice_id) if j.payload["action"] == action]
    return job


def test_mark_uncollectible_writes_the_invoice_off_at_stripe(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    hosted.exhaust("in_1", "mark_uncollectible")
    hosted.stripe.on("GET", "/v1/invoices/in_1", (200, stripe_invoice("in_1")))
    hosted.stripe.on(
        "POST",
        "/v1/invoices/in_1/mark_uncollectible",
        (200, stripe_invoice("in_1", "uncollectible")),
    )

    said = hosted.run(final_job(hosted, "in_1", "mark_uncollectible"), FINAL_ACTION_HANDLER)

    assert "mark_uncollectible in_1 done" in said
    [posted] = hosted.stripe.sent("POST")
    assert (posted.path, posted.form) == ("/v1/invoices/in_1/mark_uncollectible", [])
    assert posted.idempotency_key == "final:in_1:mark_uncollectible"
    assert posted.authorization == f"Bearer {TEST_KEY}"


def subscribed_invoice(hosted: Hosted, invoice_id: str = "in_1") -> None:
    hosted.stripe.on(
        "GET",
        f"/v1/invoices/{invoice_id}",
        (200, stripe_invoice(invoice_id, subscription="sub_1")),
    )


def test_cancel_cancels_the_invoices_subscription(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    hosted.exhaust("in_1", "cancel")
    subscribed_invoice(hosted)
    hosted.stripe.on("GET", "/v1/subscriptions/sub_1", (200, stripe_subscription()))
    hosted.stripe.on(
        "DELETE", "/v1/subscriptions/sub_1", (200, stripe_subscription("sub_1", "canceled"))
    )

    hosted.run(final_job(hosted, "in_1", "cancel"), FINAL_ACTION_HANDLER)

    [deleted] = hosted.stripe.sent("DELETE")
    assert (deleted.path, deleted.idempotency_key) == (
        "/v1/subscriptions/sub_1",
        "final:in_1:cancel",
    )
    assert hosted.stripe.sent("POST") == []


def test_a_pause_then_a_resume_after_the_recovery(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    hosted.exhaust("in_1", "pause_access")
    subscribed_invoice(hosted)
    paused = stripe_subscription(pause_collection={"behavior": "keep_as_draft"})
    hosted.stripe.on("GET", "/v1/subscriptions/sub_1", (200, stripe_subscription()), (200, paused))
    hosted.stripe.on("POST", "/v1/subscriptions/sub_1", (200, paused), (200, stripe_subscription()))

    hosted.run(final_job(hosted, "in_1", "pause_access"), FINAL_ACTION_HANDLER)
    hosted.dunning.mark_paid(TENANT, "in_1")
    hosted.run(final_job(hosted, "in_1", "resume_access"), FINAL_ACTION_HANDLER)

    pause, resume = hosted.stripe.sent("POST")
    assert pause.form == [("pause_collection[behavior]", "keep_as_draft")]
    assert pause.idempotency_key == "final:in_1:pause_access"
    assert resume.form == [("pause_collection", "")]
    assert resume.idempotency_key == "final:in_1:resume_access"


def test_a_pause_is_not_taken_for_an_invoice_recovered_meanwhile(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    hosted.exhaust("in_1", "pause_access")
    hosted.dunning.mark_paid(TENANT, "in_1")

    said = hosted.run(final_job(hosted, "in_1", "pause_access"), FINAL_ACTION_HANDLER)

    assert said.startswith("not taken")
    assert hosted.stripe.requests == []


def test_a_resume_is_not_taken_for_an_invoice_not_recovered(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    exhausted = hosted.exhaust("in_1", "pause_access")
    resume = final_action_job(exhausted, "resume_access", at=hosted.clock.now())
    hosted.store.insert(resume, now=hosted.clock.now())
    job = hosted.store.get(TENANT, resume.id)
    assert job is not None

    said = hosted.run(job, FINAL_ACTION_HANDLER)

    assert said.startswith("not taken")
    assert hosted.stripe.requests == []


@pytest.mark.parametrize("action", ["mark_uncollectible", "cancel"])
def test_a_transport_failure_at_stripe_retries_the_final_action(
    hosted: Hosted, action: str
) -> None:
    hosted.charge_with_stripe()
    hosted.exhaust("in_1", action)
    hosted.stripe.on("GET", "/v1/invoices/in_1", (503, {"error": {"type": "api_error"}}))

    with pytest.raises(AskAgain):
        hosted.run(final_job(hosted, "in_1", action), FINAL_ACTION_HANDLER)

    assert hosted.stripe.sent("POST") == [] and hosted.stripe.sent("DELETE") == []


def test_a_refused_final_action_is_permanent(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    hosted.exhaust("in_1", "mark_uncollectible")
    hosted.stripe.on("GET", "/v1/invoices/in_1", (200, stripe_invoice("in_1", "void")))

    with pytest.raises(PermanentError, match="the invoice is void"):
        hosted.run(final_job(hosted, "in_1", "mark_uncollectible"), FINAL_ACTION_HANDLER)


def test_a_final_action_without_stripe_access_waits(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    hosted.exhaust("in_1", "cancel")
    hosted.store.hosted.delete_hosted_charging(TENANT)

    with pytest.raises(AskAgain, match="no Stripe access"):
        hosted.run(final_job(hosted, "in_1", "cancel"), FINAL_ACTION_HANDLER)
    assert hosted.stripe.requests == []


def test_the_final_action_job_retries_on_its_own_policy(hosted: Hosted) -> None:
    hosted.charge_with_stripe()
    hosted.exhaust("in_1", "cancel")
    [job] = hosted.jobs("in_1")

    assert job.retry.max_attempts > 1
    assert job.run_at <= hosted.clock.now() + timedelta(seconds=1)
