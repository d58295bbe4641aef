"""The chaos run's checks catch what they claim to: each is shown a run that broke it (a key
charged twice, an attempt without a job, a lease past its time, a run log with a hole, a
killed worker still registered), and a clean run passes them all."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.chaos.invariants import Check, check_all
from bench.chaos.snapshot import Snapshot
from recoup.demo.audit import Ledger
from recoup.dunning.invoice import AttemptRecord, AttemptState, Invoice, InvoiceState
from recoup.jobs.model import BackoffPolicy, Job, JobState, PythonTarget, Run, RunOutcome

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def job(job_id: str, state: JobState, attempts: int, **more: Any) -> Job:
    fields: dict[str, Any] = dict(
        id=job_id,
        tenant="chaos",
        name=f"dunning-retry-{job_id}",
        run_at=NOW,
        target=PythonTarget(handler="dunning-attempt"),
        payload=None,
        idempotency_key=None,
        retry=BackoffPolicy(),
        timeout=timedelta(seconds=60),
        keep_for=None,
        schedule_id=None,
        state=state,
        attempts=attempts,
        lease_expires_at=None,
        leased_by=None,
        last_error=None,
        created_at=NOW,
        updated_at=NOW,
        finished_at=None,
        group="dunning:inv_1",
    )
    fields.update(more)
    return Job(**fields)


def run(job_id: str, attempt: int, outcome: RunOutcome, worker: str = "w1.0") -> Run:
    return Run(
        job_id=job_id,
        tenant="chaos",
        attempt=attempt,
        started_at=NOW,
        finished_at=NOW,
        outcome=outcome,
        worker_id=worker,
    )


INVOICE = Invoice(
    tenant="chaos",
    invoice_id="inv_1",
    customer_id="cus_1",
    amount=1900,
    currency="usd",
    failed_at=NOW - timedelta(days=40),
    timezone="UTC",
    country="US",
    decline_code="insufficient_funds",
    advice_code=None,
    card_fingerprint="card_1",
    card_network="visa",
    gateway="stripe",
    merchant_id="m_1",
    charge_url="http://127.0.0.1:1/recoup/charge",
    policy="business-days",
    state=InvoiceState.RECOVERED,
    decision="retry",
    reason="",
    final_action="pause_access",
    attempts=(
        AttemptRecord(attempt=1, at=NOW, state=AttemptState.FAILED, job_id="j1"),
        AttemptRecord(attempt=2, at=NOW, state=AttemptState.SUCCEEDED, job_id="j2"),
        AttemptRecord(attempt=3, at=NOW, state=AttemptState.CANCELLED, job_id="j3"),
    ),
    created_at=NOW,
    updated_at=NOW,
    recovered_by="attempt:2",
)

# Attempt 1 declined after a worker died holding it (a lost run, then a run to the end);
# attempt 2 charged; attempt 3 cancelled before it ran.
CLEAN = Snapshot(
    now=NOW,
    invoices=[INVOICE],
    jobs={
        "j1": job("j1", JobState.SUCCEEDED, 2),
        "j2": job("j2", JobState.SUCCEEDED, 1),
        "j3": job("j3", JobState.CANCELLED, 0),
    },
    runs={
        "j1": [run("j1", 1, RunOutcome.LOST, "w1.0"), run("j1", 2, RunOutcome.SUCCEEDED)],
        "j2": [run("j2", 1, RunOutcome.SUCCEEDED)],
    },
    gateway={
        "charges_per_key": {"initial:inv_1": 0, "charge:inv_1:1": 0, "charge:inv_1:2": 1},
        "double_charged_invoices": [],
    },
    ledger=Ledger(succeeded={"inv_1": [2]}, paid={"inv_1"}, paid_without_charge=set()),
    workers=["w2.0"],
    double_charge_alarms=[],
)


# Attempt 2 charged, but Recoup shows it cancelled: the invoice recovered by another attempt's
# `already_handled` before attempt 2's answer was heard.
CHARGED_ON_CANCELLED = replace(
    INVOICE,
    recovered_by="charge_endpoint",
    attempts=(
        INVOICE.attempts[0],
        replace(INVOICE.attempts[1], state=AttemptState.CANCELLED),
        INVOICE.attempts[2],
    ),
)


def checks(snap: Snapshot, **more: Any) -> dict[str, Check]:
    options: dict[str, Any] = dict(
        paid_out_of_band=(), killed=["w1.0"], rescued=["w1.0"], drained=True, undelivered=[]
    )
    options.update(more)
    return {c.name.split(" (")[0]: c for c in check_all(snap, **options)}


def failed(snap: Snapshot, **more: Any) -> set[str]:
    return {name for name, c in checks(snap, **more).items() if not c.passed}


def test_a_clean_run_passes_every_check() -> None:
    assert failed(CLEAN) == set()


def test_a_key_charged_twice_is_caught_at_the_gateway() -> None:
    gateway = {**CLEAN.gateway, "charges_per_key": {"charge:inv_1:2": 2}}
    gateway["double_charged_invoices"] = ["inv_1"]
    assert failed(replace(CLEAN, gateway=gateway)) == {
        "charges per",
        "at most one successful charge per invoice",
    }


def test_an_invoice_paid_another_way_and_charged_must_be_flagged_for_refund() -> None:
    name = "no charge after an invoice was paid another way"
    assert failed(CLEAN, paid_out_of_band=["inv_1"]) == {name}
    # The charge was in doubt when the customer paid: booked, then flagged as a double charge.
    flagged = replace(CLEAN, double_charge_alarms=["inv_1"])
    assert failed(flagged, paid_out_of_band=["inv_1"]) == set()
    assert "1 flagged for refund" in checks(flagged, paid_out_of_band=["inv_1"])[name].figure
    # Flagged though nobody paid another way and the gateway charged it once: a false alarm.
    assert failed(flagged) == {"every invoice.double_charged event is a real double charge"}


def test_a_charge_in_doubt_at_an_out_of_band_payment_may_wait_for_its_attempt_to_ask_again() -> (
    None
):
    # Attempt 2 timed out after the money moved; the invoice was paid another way and the
    # attempt cancelled. Its job, already begun, asks once more after its backoff.
    cancelled = replace(CHARGED_ON_CANCELLED, recovered_by="out_of_band")
    unbooked = replace(CLEAN.ledger, succeeded={})
    waiting = {**CLEAN.jobs, "j2": job("j2", JobState.SCHEDULED, 1)}
    snap = replace(CLEAN, invoices=[cancelled], ledger=unbooked, jobs=waiting)
    found = checks(snap, paid_out_of_band=["inv_1"])
    assert failed(snap, paid_out_of_band=["inv_1"]) == set()
    assert "1 still to be asked" in found["no charge after an invoice was paid another way"].figure
    # Its job finished without booking the charge: the money stays hidden.
    runs = [run("j2", 1, RunOutcome.RETRY), run("j2", 2, RunOutcome.SUCCEEDED)]
    done = replace(
        snap,
        jobs={**CLEAN.jobs, "j2": job("j2", JobState.SUCCEEDED, 2)},
        runs={**CLEAN.runs, "j2": runs},
    )
    assert failed(done, paid_out_of_band=["inv_1"]) == {
        "no charge after an invoice was paid another way",
        "the ledger and the gateway agree on every charge",
    }


def test_an_open_attempt_without_a_live_job_is_lost() -> None:
    open_invoice = replace(
        INVOICE,
        state=InvoiceState.RETRYING,
        attempts=(
            *INVOICE.attempts[:2],
            replace(INVOICE.attempts[2], state=AttemptState.SCHEDULED),
        ),
    )
    snap = replace(CLEAN, invoices=[open_invoice])
    assert "no planned attempt lost" in failed(snap)
    alive = replace(snap, jobs={**snap.jobs, "j3": job("j3", JobState.SCHEDULED, 0)})
    assert "no planned attempt lost" not in failed(alive)


def test_a_job_running_past_its_lease_is_caught() -> None:
    stuck = job(
        "j9", JobState.RUNNING, 1, lease_expires_at=NOW - timedelta(seconds=1), leased_by="w2.0"
    )
    held = job(
        "j8", JobState.RUNNING, 1, lease_expires_at=NOW + timedelta(seconds=30), leased_by="w2.0"
    )
    assert failed(replace(CLEAN, jobs={**CLEAN.jobs, "j9": stuck})) == {
        "no job running past its lease"
    }
    assert failed(replace(CLEAN, jobs={**CLEAN.jobs, "j8": held})) == set()


def test_a_run_log_with_a_hole_is_incomplete() -> None:
    holed = {**CLEAN.runs, "j1": [run("j1", 2, RunOutcome.SUCCEEDED)]}
    assert failed(replace(CLEAN, runs=holed)) == {"run logs complete"}


def test_a_killed_worker_still_registered_or_holding_a_job_is_caught() -> None:
    assert failed(replace(CLEAN, workers=["w1.0", "w2.0"])) == {
        "every killed worker found dead, its jobs handed back"
    }
    held = job(
        "j9", JobState.RUNNING, 1, lease_expires_at=NOW + timedelta(seconds=30), leased_by="w1.0"
    )
    assert failed(replace(CLEAN, jobs={**CLEAN.jobs, "j9": held})) == {
        "every killed worker found dead, its jobs handed back"
    }


def test_a_charge_credited_elsewhere_and_a_false_double_charge_alarm_fail_the_run() -> None:
    snap = replace(CLEAN, invoices=[CHARGED_ON_CANCELLED], double_charge_alarms=["inv_1"])
    found = checks(snap)
    assert {n for n, c in found.items() if not c.passed} == {
        "Recoup credits each charge to the attempt that made it",
        "every invoice.double_charged event is a real double charge",
    }
    assert all(c.binding for c in found.values() if not c.passed)


def test_a_charge_on_a_cancelled_attempt_still_to_be_asked_again_is_not_credited_elsewhere() -> (
    None
):
    name = "Recoup credits each charge to the attempt that made it"
    # Its job lost its answer and waits for its backoff: the next try hears the charge.
    waiting = {**CLEAN.jobs, "j2": job("j2", JobState.SCHEDULED, 1)}
    snap = replace(CLEAN, invoices=[CHARGED_ON_CANCELLED], jobs=waiting)
    assert name not in failed(snap)
    assert "1 still to be heard" in checks(snap)[name].figure
    # Never claimed (cancelled before it ran), it will never ask: the charge is not its own.
    never_asked = {**CLEAN.jobs, "j2": job("j2", JobState.SCHEDULED, 0)}
    assert name in failed(replace(snap, jobs=never_asked))


def test_the_ledger_and_the_gateway_must_agree_on_every_charge() -> None:
    phantom = Ledger(succeeded={"inv_1": [2, 1]}, paid={"inv_1"}, paid_without_charge=set())
    assert "the ledger and the gateway agree on every charge" in failed(
        replace(CLEAN, ledger=phantom)
    )
    unbooked = {**CLEAN.gateway, "charges_per_key": {"charge:inv_1:1": 1, "charge:inv_1:2": 1}}
    assert "the ledger and the gateway agree on every charge" in failed(
        replace(CLEAN, gateway=unbooked)
    )
