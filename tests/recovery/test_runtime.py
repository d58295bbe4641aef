"""The dunning runtime end to end on a test clock, counting charges at the simulated gateway:
exactly one charge per attempt under duplicate triggers, ambiguous timeouts and concurrent
payments; cancellation, final actions and events once each."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import pytest
from starlette.responses import JSONResponse

from recoup.dunning.invoice import AttemptState, InvoiceState
from recoup.dunning.lifecycle import Opening, open_invoice
from recoup.dunning.planner import plan_retries
from recoup.errors import Conflict, InvalidInput, StorageError
from recoup.jobs.handlers import HandlerContext
from recoup.jobs.model import Job, JobState, NewJob
from recoup.payments import Fault, FaultKind, Scenario
from recoup.recovery.access_tracking import access_job_id
from recoup.recovery.attempts import AttemptRunner
from recoup.recovery.customers import CustomerBook
from recoup.recovery.renewals import RenewalReport
from tests.recovery.conftest import START, Runtime
from tests.recovery.test_emails import with_emails
from tests.support import charge_failure
from tests.support_smtp import SmtpSink, smtp_sink  # noqa: F401  (the fixture)

DAY = timedelta(days=1)


def test_two_weeks_on_a_test_clock_run_the_plan_in_order_and_recover_once(
    runtime: Runtime,
) -> None:
    runtime.side.gateway.add_card("fp_nsf", Scenario.soft(clears_after=timedelta(days=5)))
    invoice = runtime.fail("inv_1", "fp_nsf")
    planned = [a.at for a in invoice.attempts]
    assert len(planned) == 4 and planned == sorted(planned)
    runtime.advance(14 * DAY)
    after = runtime.invoice("inv_1")
    assert after.state is InvoiceState.RECOVERED
    asked = [r["attempt"] for r in runtime.side.requests]
    assert asked == sorted(asked) and asked[-1] == int(after.recovered_by.split(":")[1])  # type: ignore[union-attr]
    gateway = runtime.side.gateway
    assert gateway.total_charged("inv_1") == 1999
    assert max(gateway.charges_per_key().values()) == 1
    assert gateway.double_charged_invoices() == []
    types = runtime.side.event_types("inv_1")
    assert types[0] == "invoice.retry_scheduled" and types.count("invoice.recovered") == 1
    assert types.count("invoice.retry_failed") == len(asked) - 1
    # Each event was delivered under its own id, as its webhook-id.
    assert all(e["webhook_id"] == e["id"] for e in runtime.side.events)
    # The attempts after the recovery were cancelled, with their jobs.
    for a in after.attempts:
        if a.state is AttemptState.CANCELLED:
            job = runtime.store.get("default", a.job_id)
            assert job is not None and job.state is JobState.CANCELLED


def test_a_replayed_failure_changes_nothing_and_another_failure_conflicts(
    runtime: Runtime,
) -> None:
    first = runtime.fail("inv_1", "fp_1")
    again = runtime.fail("inv_1", "fp_1")
    assert again == first
    jobs = [runtime.store.get("default", a.job_id) for a in first.attempts]
    assert all(j is not None and j.state is JobState.SCHEDULED for j in jobs)
    with pytest.raises(Conflict, match="inv_1"):
        runtime.fail("inv_1", "fp_1", at=START + timedelta(hours=1))


def test_the_runtime_creates_its_jobs_through_the_schedulers_path(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One way to create a job: a job the runtime made any other way would be missing here.
    seen: list[str] = []
    real = runtime.dunning.scheduler.insert_many_checked

    def spy(jobs: Sequence[NewJob], *, now: datetime) -> int:
        seen.extend(job.id for job in jobs)
        return real(jobs, now=now)

    monkeypatch.setattr(runtime.dunning.scheduler, "insert_many_checked", spy)
    invoice = runtime.fail("inv_1", "fp_1")
    assert invoice.attempts and {a.job_id for a in invoice.attempts} <= set(seen)
    assert all(runtime.store.get("default", job_id) is not None for job_id in seen)


def test_renewals_and_access_create_their_jobs_through_the_schedulers_path_only(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A store that takes jobs only from `Scheduler.insert_many_checked`: a job the renewal or
    # the access flow created around it (`store.insert`, or `insert_many` called directly)
    # is refused and noted, in the caller's thread or a worker's.
    with_emails(runtime, smtp_sink)
    scheduler, store = runtime.dunning.scheduler, runtime.store
    checked, insert_many = scheduler.insert_many_checked, store.insert_many
    through = threading.local()
    created: list[str] = []
    around: list[str] = []

    def one_path(jobs: Sequence[NewJob], *, now: datetime) -> int:
        through.inside = True
        try:
            return checked(jobs, now=now)
        finally:
            through.inside = False

    def only_from_the_path(jobs: Sequence[NewJob], *, now: datetime) -> int:
        if not getattr(through, "inside", False):
            around.extend(job.id for job in jobs)
            raise AssertionError("jobs inserted around the Scheduler's path")
        created.extend(job.id for job in jobs)
        return insert_many(jobs, now=now)

    def refused(job: NewJob, *, now: datetime) -> Job:
        around.append(job.id)
        raise AssertionError("a job inserted around the Scheduler's path")

    monkeypatch.setattr(scheduler, "insert_many_checked", one_path)
    monkeypatch.setattr(store, "insert_many", only_from_the_path)
    monkeypatch.setattr(store, "insert", refused)

    book = CustomerBook(runtime.dunning)
    told, _ = book.tell_renewal(
        "default",
        RenewalReport(
            customer_id="cus_1",
            renews_at=START + timedelta(days=30),
            amount=1999,
            currency="usd",
            timezone="America/Chicago",
            exp_month=6,  # runs out before the renewal: a reminder
            exp_year=2026,
            customer_email="ada@example.com",
        ),
    )
    assert told.reminder_job_id in created
    runtime.fail("inv_1", "fp_never")  # in its grace period: a job ends it
    grace_ends = START + timedelta(days=7)
    assert access_job_id("default", "cus_inv_1", grace_ends) in created
    runtime.advance(timedelta(days=8))  # the grace ends: the access job runs in a worker
    ran = runtime.store.get("default", access_job_id("default", "cus_inv_1", grace_ends))
    assert ran is not None and ran.state is JobState.SUCCEEDED
    assert around == []


def test_a_hard_decline_on_attempt_two_cancels_three_and_four_and_acts_once(
    runtime: Runtime,
) -> None:
    gateway = runtime.side.gateway
    runtime.side.before_charge = lambda data: (
        gateway.add_card("fp_x", Scenario.hard()) if data["attempt"] == 2 else None
    )
    gateway.add_card("fp_x", Scenario.soft())
    runtime.fail("inv_1", "fp_x")
    runtime.advance(21 * DAY)
    invoice = runtime.invoice("inv_1")
    assert invoice.state is InvoiceState.EXHAUSTED
    states = [a.state for a in invoice.attempts]
    assert states == [AttemptState.FAILED, AttemptState.FAILED] + [AttemptState.CANCELLED] * 2
    assert [r["attempt"] for r in runtime.side.requests] == [1, 2]
    for a in invoice.attempts[2:]:
        assert runtime.store.get("default", a.job_id).state is JobState.CANCELLED
    exhausted = [e for e in runtime.side.events if e["type"] == "invoice.exhausted"]
    assert len(exhausted) == 1 and exhausted[0]["data"]["final_action"] == "pause_access"
    assert gateway.total_charged("inv_1") == 0


def test_timeout_after_the_provider_charged_is_reconciled_without_a_second_charge(
    runtime: Runtime,
) -> None:
    gateway = runtime.side.gateway
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    invoice = runtime.fail("inv_1", "fp_ok")
    runtime.advance(invoice.attempts[0].at - START)
    assert runtime.invoice("inv_1").attempt(1).state is AttemptState.PENDING  # type: ignore[union-attr]
    runtime.advance(DAY)  # the attempt's job asks again, with the same keys
    assert runtime.invoice("inv_1").state is InvoiceState.RECOVERED
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}
    assert [r["attempt"] for r in runtime.side.requests] == [1, 1]


def test_timeout_before_the_charge_charges_once_on_the_retry(runtime: Runtime) -> None:
    gateway = runtime.side.gateway
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE, times=1))
    runtime.fail("inv_1", "fp_ok")
    runtime.advance(3 * DAY)
    assert runtime.invoice("inv_1").state is InvoiceState.RECOVERED
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}


def test_an_attempt_fired_twice_concurrently_charges_once(runtime: Runtime) -> None:
    invoice = runtime.fail("inv_1", "fp_ok")
    runtime.clock.set(invoice.attempts[0].at)
    job = runtime.store.get("default", invoice.attempts[0].job_id)
    runner = AttemptRunner(runtime.dunning, http_session=aiohttp.ClientSession)
    ctx = HandlerContext(
        job_id=job.id,
        tenant="default",
        name=job.name,
        attempt=1,
        payload=job.payload,
        idempotency_key=job.idempotency_key,
        run_at=job.run_at,
    )

    # Both copies pass the state check before either charges: each waits for the other.
    barrier = threading.Barrier(2, timeout=10)
    runtime.side.before_charge = lambda data: barrier.wait()

    async def twice() -> list[Any]:
        return await asyncio.gather(
            runner.attempt(ctx), runner.attempt(ctx), return_exceptions=True
        )

    results = asyncio.run(twice())
    assert all(not isinstance(r, BaseException) for r in results), results
    assert runtime.side.gateway.charges_per_key() == {"charge:inv_1:1": 1}
    after = runtime.invoice("inv_1")
    assert after.state is InvoiceState.RECOVERED and after.recovered_by == "attempt:1"
    # And the job itself fires later: the backstop asks nothing.
    runtime.advance(DAY)
    assert len(runtime.side.requests) == 2
    assert runtime.side.event_types("inv_1").count("invoice.recovered") == 1


def test_paid_before_the_attempt_cancels_it_and_nothing_is_asked(runtime: Runtime) -> None:
    invoice = runtime.fail("inv_1", "fp_ok")
    runtime.dunning.mark_paid("default", "inv_1")
    runtime.advance(21 * DAY)
    assert runtime.side.requests == []
    assert runtime.side.gateway.total_charged("inv_1") == 0
    for a in invoice.attempts:
        assert runtime.store.get("default", a.job_id).state is JobState.CANCELLED
    # The customer's access follows: grace from the failure, active again once paid.
    assert runtime.side.event_types("inv_1") == [
        "invoice.retry_scheduled",
        "customer.access_changed",
        "invoice.recovered",
        "customer.access_changed",
    ]


def test_paid_while_an_attempt_is_in_flight_reports_the_double_charge(runtime: Runtime) -> None:
    runtime.side.before_charge = lambda data: runtime.dunning.mark_paid("default", "inv_1")
    runtime.fail("inv_1", "fp_ok")
    runtime.advance(3 * DAY)
    invoice = runtime.invoice("inv_1")
    assert invoice.state is InvoiceState.RECOVERED
    assert invoice.recovered_by == "paid_out_of_band"
    types = runtime.side.event_types("inv_1")
    assert types.count("invoice.double_charged") == 1
    assert runtime.side.gateway.charges_per_key() == {"charge:inv_1:1": 1}
    # The attempt's job was left to finish, not cancelled under it: a worker holding it is
    # never told to drop it (its heartbeat still holds it), so the answer is heard.
    first = next(a for a in invoice.attempts if a.attempt == 1)
    assert first.state is AttemptState.SUCCEEDED
    job = runtime.store.get("default", first.job_id)
    assert job is not None and job.state is JobState.SUCCEEDED
    later = [a for a in invoice.attempts if a.attempt > 1]
    assert later and all(
        runtime.store.get("default", a.job_id).state is JobState.CANCELLED for a in later
    )


def test_a_charge_whose_answer_was_lost_is_heard_after_a_sibling_recovered_the_invoice(
    runtime: Runtime,
) -> None:
    lost: list[int] = []

    def lose_the_first_answer(data: dict[str, Any], answer: Any) -> Any:
        if not lost:  # charged at the gateway, but the answer never reaches Recoup
            lost.append(data["attempt"])
            return JSONResponse({"error": "connection reset"}, status_code=503)
        return answer

    runtime.side.after_charge = lose_the_first_answer
    invoice = runtime.fail("inv_1", "fp_ok")
    first, second = invoice.attempts[0], invoice.attempts[1]
    runtime.advance(first.at - START + timedelta(seconds=1))
    assert lost == [1] and runtime.side.gateway.charges_per_key() == {"charge:inv_1:1": 1}
    # Another attempt's request finds the invoice settled: recovered by the charge endpoint,
    # and the attempts still open are cancelled, but not attempt 1's job, already asked.
    runtime.dunning.report_outcome("default", "inv_1", second.attempt, "already_handled")
    assert runtime.store.get("default", first.job_id).state is JobState.SCHEDULED
    for other in invoice.attempts[2:]:
        assert runtime.store.get("default", other.job_id).state is JobState.CANCELLED
    runtime.advance(DAY)
    # Asked once more, the endpoint replays the charge it made: credited to attempt 1.
    after = runtime.invoice("inv_1")
    assert after.state is InvoiceState.RECOVERED and after.recovered_by == "attempt:1"
    assert after.attempt(1).state is AttemptState.SUCCEEDED
    assert runtime.side.gateway.charges_per_key() == {"charge:inv_1:1": 1}
    assert [r["attempt"] for r in runtime.side.requests] == [1, 1]  # attempt 2: not asked
    types = runtime.side.event_types("inv_1")
    assert "invoice.double_charged" not in types
    assert runtime.store.get("default", first.job_id).state is JobState.SUCCEEDED


def test_an_attempt_asked_before_and_cancelled_asks_again_but_charges_nothing(
    runtime: Runtime,
) -> None:
    answers = iter([JSONResponse({"error": "busy"}, status_code=503)])
    runtime.side.before_charge = None
    runtime.side.after_charge = lambda data, answer: next(answers, answer)
    runtime.side.gateway.add_card("fp_nsf", Scenario.soft(clears_after=timedelta(days=30)))
    invoice = runtime.fail("inv_1", "fp_nsf")
    first = invoice.attempts[0]
    runtime.advance(first.at - START + timedelta(seconds=1))
    charged = dict(runtime.side.gateway.charges_per_key())
    runtime.dunning.mark_paid("default", "inv_1")  # paid another way while it waits to retry
    runtime.advance(DAY)
    asked = [r["attempt"] for r in runtime.side.requests]
    assert asked == [1, 1]  # heard once more, under the same keys
    assert runtime.side.gateway.charges_per_key() == charged  # and nothing charged again
    after = runtime.invoice("inv_1")
    assert after.recovered_by == "paid_out_of_band"
    assert "invoice.double_charged" not in runtime.side.event_types("inv_1")


def test_a_charge_in_doubt_when_paid_another_way_is_heard_and_flagged_for_refund(
    runtime: Runtime,
) -> None:
    # The charge timed out after the money moved (pending); the customer then paid another
    # way. Asked again, the endpoint finds the charge: Recoup hears the success and raises
    # invoice.double_charged, the refund to make, instead of losing the money moved.
    runtime.side.gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    invoice = runtime.fail("inv_1", "fp_ok")
    first = invoice.attempts[0]
    runtime.advance(first.at - START + timedelta(seconds=1))
    assert runtime.side.gateway.charges_per_key() == {"charge:inv_1:1": 1}
    assert runtime.invoice("inv_1").attempt(1).state is AttemptState.PENDING
    runtime.side.paid.add("inv_1")
    runtime.dunning.mark_paid("default", "inv_1")
    runtime.advance(DAY)
    assert [r["attempt"] for r in runtime.side.requests] == [1, 1]
    after = runtime.invoice("inv_1")
    assert after.recovered_by == "paid_out_of_band"
    assert after.attempt(1).state is AttemptState.SUCCEEDED
    assert runtime.side.event_types("inv_1").count("invoice.double_charged") == 1
    assert runtime.side.gateway.charges_per_key() == {"charge:inv_1:1": 1}


def test_an_expired_card_then_a_card_update_gets_one_prompt_retry(runtime: Runtime) -> None:
    gateway = runtime.side.gateway
    gateway.add_card("fp_exp", Scenario.expired())
    invoice = runtime.fail("inv_1", "fp_exp", decline="expired_card")
    assert invoice.state is InvoiceState.AWAITING_CUSTOMER and invoice.attempts == ()
    runtime.advance(2 * DAY)
    assert runtime.side.requests == []
    gateway.update_card("fp_exp")
    updated = runtime.dunning.payment_method_updated("default", "inv_1")
    assert [a.at for a in updated.attempts] == [runtime.clock.now()]
    runtime.advance(timedelta(0))
    assert runtime.invoice("inv_1").state is InvoiceState.RECOVERED
    assert [r["attempt"] for r in runtime.side.requests] == [1]
    assert runtime.side.event_types("inv_1") == [
        "invoice.awaiting_customer",
        "customer.access_changed",  # grace
        "invoice.retry_scheduled",
        "invoice.recovered",
        "customer.access_changed",  # active
    ]


def test_the_deadline_exhausts_an_invoice_whose_customer_never_came(runtime: Runtime) -> None:
    runtime.fail("inv_1", "fp_exp", decline="expired_card")
    runtime.advance(22 * DAY)
    assert runtime.invoice("inv_1").state is InvoiceState.EXHAUSTED
    assert runtime.side.event_types("inv_1") == [
        "invoice.awaiting_customer",
        "customer.access_changed",  # grace
        "customer.access_changed",  # restricted: the grace period ended, the customer never came
        "invoice.exhausted",
        "customer.access_changed",  # paused: the final action
    ]


def test_resync_recreates_the_jobs_and_events_a_crash_left_undone(runtime: Runtime) -> None:
    # As if the process died right after storing the invoice: no job, no event sent.
    opening = Opening(
        tenant="default",
        failure=charge_failure(
            failed_at=START, card_fingerprint="fp_ok", gateway=None, merchant_id=None
        ),
        charge_url=runtime.charge_url,
        policy=runtime.dunning.policy("default"),
    )
    decision = plan_retries(opening.failure.for_planner(), opening.policy)
    invoice, first = open_invoice(opening, decision, now=START)
    runtime.store.create_invoice(invoice, first.events)
    runtime.side.cards["inv_1"] = "fp_ok"
    assert all(runtime.store.get("default", a.job_id) is None for a in invoice.attempts)
    assert runtime.dunning.resync() == 1 + len(invoice.attempts)
    assert all(runtime.store.get("default", a.job_id) is not None for a in invoice.attempts)
    assert runtime.dunning.resync() == 0
    runtime.advance(3 * DAY)
    assert runtime.invoice("inv_1").state is InvoiceState.RECOVERED
    assert runtime.side.event_types("inv_1")[0] == "invoice.retry_scheduled"


def test_a_transition_whose_jobs_cannot_be_written_is_undone_whole(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The invoice's change and the jobs it commands are one unit of work: no invoice waits
    # for an attempt that has no job.
    runtime.fail("inv_1", "fp_exp", decline="expired_card")
    before = runtime.invoice("inv_1")
    events_before = runtime.store.invoice_events("default", "inv_1")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise StorageError("disk full")

    monkeypatch.setattr(runtime.store, "insert_many", refuse)
    with pytest.raises(StorageError, match="disk full"):
        runtime.dunning.payment_method_updated("default", "inv_1")
    monkeypatch.undo()
    assert runtime.invoice("inv_1") == before
    assert runtime.store.invoice_events("default", "inv_1") == events_before
    assert runtime.store.attempts_out_of_sync() == []
    updated = runtime.dunning.payment_method_updated("default", "inv_1")
    assert [a.state for a in updated.attempts] == [AttemptState.SCHEDULED]
    assert runtime.store.get("default", updated.attempts[0].job_id) is not None


def test_an_outcome_given_another_invoice_as_seen_is_refused(runtime: Runtime) -> None:
    runtime.fail("inv_1", "fp_ok")
    other = runtime.fail("inv_2", "fp_ok")
    before = runtime.invoice("inv_1")
    with pytest.raises(InvalidInput, match="seen"):
        runtime.dunning.report_outcome("default", "inv_1", 1, "failed", seen=other)
    assert runtime.invoice("inv_1") == before


def test_an_outcome_reported_later_for_a_202_endpoint(runtime: Runtime) -> None:
    invoice = runtime.fail("inv_1", "fp_ok")
    after = runtime.dunning.report_outcome(
        "default", "inv_1", 1, "failed", decline_code="insufficient_funds"
    )
    assert after.attempt(1).state is AttemptState.FAILED  # type: ignore[union-attr]
    same = runtime.dunning.report_outcome(
        "default", "inv_1", 1, "failed", decline_code="insufficient_funds"
    )
    assert same.version == after.version
    assert invoice.version < after.version
