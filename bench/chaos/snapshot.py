"""What the run left, read once at the end: Recoup's invoices, jobs and run logs (through the
store protocol), the gateway's counts and the billing app's ledger."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from recoup.demo.audit import Ledger
from recoup.dunning.invoice import Invoice
from recoup.jobs.model import Job, Run
from recoup.jobs.store import MAX_PAGE, JobFilter
from recoup.recovery.store import InvoiceFilter
from recoup.storage import Store


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    now: datetime
    invoices: list[Invoice]
    jobs: dict[str, Job]  # by id: every job of the tenant
    runs: dict[str, list[Run]]  # job id → its run log (jobs that started at least once)
    gateway: dict[str, Any]  # the simulated gateway's stats
    ledger: Ledger
    workers: list[str]  # ids in the workers table
    double_charge_alarms: list[str]  # invoices with an `invoice.double_charged` event


def read_recoup(
    store: Store, tenant: str
) -> tuple[list[Invoice], dict[str, Job], dict[str, list[Run]]]:
    invoices: list[Invoice] = []
    cursor: str | None = None
    while True:
        page = store.list_invoices(InvoiceFilter(tenant=tenant, limit=1000, cursor=cursor))
        invoices += page.invoices
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    jobs: dict[str, Job] = {}
    cursor = None
    while True:
        jobs_page = store.list_jobs(JobFilter(tenant=tenant, limit=MAX_PAGE, cursor=cursor))
        jobs.update((job.id, job) for job in jobs_page.jobs)
        if jobs_page.next_cursor is None:
            break
        cursor = jobs_page.next_cursor
    runs = {job.id: store.runs(tenant, job.id) for job in jobs.values() if job.attempts > 0}
    return invoices, jobs, runs


def double_charge_alarms(store: Store, tenant: str, invoices: list[Invoice]) -> list[str]:
    """The invoices Recoup told the tenant were charged twice (`invoice.double_charged`)."""
    return [
        i.invoice_id
        for i in invoices
        if any(
            e.type == "invoice.double_charged" for e in store.invoice_events(tenant, i.invoice_id)
        )
    ]


__all__ = ["Snapshot", "double_charge_alarms", "read_recoup"]
