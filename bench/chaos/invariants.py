"""The invariants a chaos run must keep, checked by machine over its `Snapshot`. Each check
gives its figure and the first offenders; the run fails if any check fails.

- charges per (invoice, attempt) ≤ 1, at the gateway (money moved under one key);
- at most one successful charge per invoice, at the gateway and in the receiver's ledger;
- the ledger and the gateway agree: a booked charge moved money under its key, and money
  moved under a key is booked unless its attempt is still open or still to be asked again;
- no charge after an invoice was paid another way; a charge in doubt when it was (timed out
  after the money moved) is booked and flagged for refund (`invoice.double_charged`) once its
  attempt is asked again;
- no planned attempt lost: each attempt of each invoice ran to an outcome, was cancelled, or
  is still open with a live job; an invoice not final has a live job;
- no job left `running` past its lease;
- run logs complete: every finished job has one run per attempt it started, the last one
  with the job's outcome;
- every killed worker found dead and its jobs handed back (none still leased by it);
- the system drained (nothing due, nothing running) and the load was delivered.

Two more compare Recoup's records with the money (the accuracy of its account, which the
recovery report and the merchant's refunds rely on):

- Recoup credits each charge to the attempt that made it (that attempt succeeded, or is
  still open);
- every `invoice.double_charged` event Recoup sent is a real double charge: at the gateway,
  or a charge of an invoice the customer also paid another way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.chaos.snapshot import Snapshot
from recoup.demo.audit import count_double_charges
from recoup.dunning.invoice import AttemptRecord, AttemptState, InvoiceState, job_group
from recoup.jobs.model import JobState, RunOutcome

SHOWN = 5  # offenders listed per failed check

_FINAL_ATTEMPT = (AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.ERRORED)
_OPEN_ATTEMPT = (AttemptState.SCHEDULED, AttemptState.PENDING)
_RUN_OF_JOB = {JobState.SUCCEEDED: RunOutcome.SUCCEEDED, JobState.FAILED: RunOutcome.FAILED}


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    figure: str
    offenders: list[str] = field(default_factory=list)
    binding: bool = True  # False: a finding, reported, that does not fail the run (none now)

    @property
    def passed(self) -> bool:
        return not self.offenders

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "binding": self.binding,
            "figure": self.figure,
            "offenders": len(self.offenders),
            "first_offenders": self.offenders[:SHOWN],
        }


def check_all(
    snap: Snapshot,
    *,
    paid_out_of_band: Iterable[str],
    killed: Sequence[str],
    rescued: Iterable[str],
    drained: bool,
    undelivered: Sequence[str],
) -> list[Check]:
    paid = set(paid_out_of_band)
    return [
        charges_per_attempt(snap),
        one_charge_per_invoice(snap),
        ledger_charges_moved_money(snap),
        no_charge_after_paid(snap, paid),
        no_attempt_lost(snap),
        no_expired_lease(snap),
        run_logs_complete(snap),
        killed_workers_rescued(snap, killed, set(rescued)),
        Check(
            name="drained: nothing due or running at the end",
            figure="yes" if drained else "no",
            offenders=[] if drained else ["jobs were still due or running at the deadline"],
        ),
        Check(
            name="every customer event delivered through the chaos",
            figure=f"{len(undelivered)} undelivered",
            offenders=list(undelivered),
        ),
        charges_credited_to_their_attempt(snap),
        double_charge_alarms_are_real(snap, paid),
    ]


def charges_per_attempt(snap: Snapshot) -> Check:
    per_key: dict[str, int] = snap.gateway["charges_per_key"]
    attempts = {k: n for k, n in per_key.items() if k.startswith("charge:")}
    most = max(attempts.values(), default=0)
    return Check(
        name="charges per (invoice, attempt) ≤ 1",
        figure=f"max {most} over {len(attempts)} attempt keys charged",
        offenders=sorted(f"{k}: {n}" for k, n in attempts.items() if n > 1),
    )


def one_charge_per_invoice(snap: Snapshot) -> Check:
    doubles = count_double_charges(snap.gateway, snap.ledger, ())
    twice = sorted(set(doubles.gateway_invoices) | set(doubles.ledger_invoices))
    return Check(
        name="at most one successful charge per invoice (gateway and ledger)",
        figure=f"{doubles.money_moved} charges moved money, {len(twice)} invoices twice",
        offenders=twice,
    )


def ledger_charges_moved_money(snap: Snapshot) -> Check:
    """Both ways: a booked charge moved money under its key; money moved under a key is
    booked, unless its attempt is still open (a timed-out charge the receiver reconciles
    when the attempt is asked again)."""
    per_key: dict[str, int] = snap.gateway["charges_per_key"]
    booked = {f"charge:{i}:{n}" for i, numbers in snap.ledger.succeeded.items() for n in numbers}
    moved = {k for k, times in per_key.items() if k.startswith("charge:") and times > 0}
    offenders = sorted(f"{k}: booked, no money moved" for k in booked - moved)
    open_keys = {
        f"charge:{i.invoice_id}:{a.attempt}"
        for i in snap.invoices
        for a in i.attempts
        if a.state in _OPEN_ATTEMPT or _to_be_heard(snap, a)
    }
    unbooked = moved - booked
    offenders += sorted(
        f"{k}: money moved, not booked, attempt closed" for k in unbooked - open_keys
    )
    return Check(
        name="the ledger and the gateway agree on every charge",
        figure=f"{len(booked)} booked, {len(moved)} keys moved money, "
        f"{len(unbooked & open_keys)} not booked yet (their attempt still open or to be asked)",
        offenders=offenders,
    )


def no_charge_after_paid(snap: Snapshot, paid_out_of_band: set[str]) -> Check:
    """The receiver charges only an open invoice, under its lock, so money moved for an
    invoice paid another way was moved before: a charge that timed out, in doubt when the
    customer paid. It must not stay hidden: booked and flagged, or still to be asked."""
    charged = count_double_charges(snap.gateway, snap.ledger, paid_out_of_band)
    by_id = {i.invoice_id: i for i in snap.invoices}
    flagged = set(snap.double_charge_alarms)
    offenders: list[str] = []
    owed = 0
    for invoice_id in charged.paid_out_of_band_and_charged:
        invoice = by_id.get(invoice_id)
        moved = _moved_attempts(snap, invoice_id)
        if invoice is not None and any(
            _to_be_heard(snap, a) for a in invoice.attempts if a.attempt in moved
        ):
            owed += 1
        elif invoice_id not in snap.ledger.succeeded:
            offenders.append(f"{invoice_id}: charged, not booked")
        elif invoice_id not in flagged:
            offenders.append(f"{invoice_id}: charged and booked, no invoice.double_charged")
    return Check(
        name="no charge after an invoice was paid another way (one in doubt then is flagged)",
        figure=f"{len(paid_out_of_band)} paid another way while open, "
        f"{len(charged.paid_out_of_band_and_charged)} charged while in doubt: "
        f"{len(charged.paid_out_of_band_and_charged) - owed - len(offenders)} flagged for "
        f"refund, {owed} still to be asked",
        offenders=offenders,
    )


def _to_be_heard(snap: Snapshot, a: AttemptRecord) -> bool:
    """Cancelled after its request went out, with its job still live: asked once more on its
    next try (after a backoff the run may not wait for), then credited."""
    job = snap.jobs.get(a.job_id)
    return (
        a.state is AttemptState.CANCELLED
        and job is not None
        and job.state in (JobState.SCHEDULED, JobState.RUNNING)
        and job.attempts >= 1
    )


def _moved_attempts(snap: Snapshot, invoice_id: str) -> set[int]:
    """The attempts of `invoice_id` under whose keys the gateway moved money."""
    numbers: set[int] = set()
    for key, times in snap.gateway["charges_per_key"].items():
        parts = key.split(":")
        if times > 0 and len(parts) == 3 and parts[1] == invoice_id and parts[2].isdigit():
            numbers.add(int(parts[2]))
    return numbers


def no_attempt_lost(snap: Snapshot) -> Check:
    offenders: list[str] = []
    attempts = 0
    live_groups = {j.group for j in snap.jobs.values() if j.state.is_live}
    for invoice in snap.invoices:
        for a in invoice.attempts:
            attempts += 1
            job = snap.jobs.get(a.job_id)
            where = f"{invoice.invoice_id} attempt {a.attempt} ({a.state})"
            if job is None:
                if a.state is not AttemptState.CANCELLED:
                    offenders.append(f"{where}: no job")
                continue
            if a.state in _OPEN_ATTEMPT and not job.state.is_live:
                offenders.append(f"{where}: open, but its job is {job.state}")
            elif a.state in _FINAL_ATTEMPT and job.state.is_live:
                offenders.append(f"{where}: has its outcome, but its job is {job.state}")
        if not invoice.state.is_final:
            if job_group(invoice.invoice_id) not in live_groups:
                offenders.append(f"{invoice.invoice_id} ({invoice.state}): no live job")
    return Check(
        name="no planned attempt lost (ran, cancelled, or open with a live job)",
        figure=f"{attempts} attempts of {len(snap.invoices)} invoices",
        offenders=offenders,
    )


def no_expired_lease(snap: Snapshot) -> Check:
    running = [j for j in snap.jobs.values() if j.state is JobState.RUNNING]
    expired = [
        f"{j.id} leased by {j.leased_by} until {j.lease_expires_at}"
        for j in running
        if j.lease_expires_at is None or j.lease_expires_at < snap.now
    ]
    return Check(
        name="no job running past its lease",
        figure=f"{len(running)} running at the end, {len(expired)} past the lease",
        offenders=expired,
    )


def run_logs_complete(snap: Snapshot) -> Check:
    offenders: list[str] = []
    finished = 0
    for job in snap.jobs.values():
        if job.state not in _RUN_OF_JOB or job.attempts == 0:
            continue
        finished += 1
        runs = snap.runs.get(job.id, [])
        numbers = sorted(r.attempt for r in runs)
        if numbers != list(range(1, job.attempts + 1)):
            offenders.append(f"{job.name}: {job.attempts} attempts, runs {numbers}")
        elif max(runs, key=lambda r: r.attempt).outcome is not _RUN_OF_JOB[job.state]:
            offenders.append(f"{job.name}: {job.state}, last run {runs[-1].outcome}")
    return Check(
        name="run logs complete (one run per attempt of every finished job)",
        figure=f"{finished} finished jobs, {sum(len(r) for r in snap.runs.values())} runs",
        offenders=offenders,
    )


def killed_workers_rescued(snap: Snapshot, killed: Sequence[str], rescued: set[str]) -> Check:
    dead = set(killed)
    offenders = [f"{w}: still registered" for w in killed if w in snap.workers]
    offenders += [
        f"{j.name} still leased by the killed {j.leased_by}"
        for j in snap.jobs.values()
        if j.state is JobState.RUNNING and j.leased_by in dead
    ]
    return Check(
        name="every killed worker found dead, its jobs handed back",
        figure=f"{len(killed)} kills, {len(dead & rescued)} sessions seen removed",
        offenders=offenders,
    )


def charges_credited_to_their_attempt(snap: Snapshot) -> Check:
    by_id = {i.invoice_id: i for i in snap.invoices}
    offenders: list[str] = []
    charged = owed = 0
    for invoice_id, numbers in snap.ledger.succeeded.items():
        invoice = by_id.get(invoice_id)
        if invoice is None:
            continue  # a renewal paid at its first charge: never in dunning
        for n in numbers:
            charged += 1
            a = invoice.attempt(n)
            to_be_heard = a is not None and _to_be_heard(snap, a)
            owed += to_be_heard
            known = a is not None and (
                a.state is AttemptState.SUCCEEDED
                or (a.state in _OPEN_ATTEMPT and invoice.state is InvoiceState.RETRYING)
                or to_be_heard
            )
            if not known:
                state = "no such attempt" if a is None else f"attempt {a.state}"
                others = ", ".join(f"{b.attempt} {b.state}" for b in invoice.attempts)
                offenders.append(
                    f"{invoice_id} charged by attempt {n}: Recoup has {state} (invoice "
                    f"{invoice.state} by {invoice.recovered_by}; attempts {others})"
                )
    return Check(
        name="Recoup credits each charge to the attempt that made it",
        figure=f"{charged} charges in the ledger, {len(offenders)} credited elsewhere, "
        f"{owed} still to be heard (their attempt's job asks again after its backoff)",
        offenders=offenders,
    )


def double_charge_alarms_are_real(snap: Snapshot, paid_out_of_band: set[str]) -> Check:
    doubles = count_double_charges(snap.gateway, snap.ledger, paid_out_of_band)
    real = (
        set(doubles.gateway_invoices)
        | set(doubles.ledger_invoices)
        | set(doubles.paid_out_of_band_and_charged)
    )
    return Check(
        name="every invoice.double_charged event is a real double charge",
        figure=f"{len(snap.double_charge_alarms)} invoices flagged, {len(real)} charged twice",
        offenders=[
            f"{i}: flagged, charged once" for i in snap.double_charge_alarms if i not in real
        ],
    )


__all__ = ["Check", "check_all"]
