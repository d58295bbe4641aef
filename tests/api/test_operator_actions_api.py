"""The API's own retry, cancel, stop-dunning and mark-paid routes record who did it (the
token's label, else its prefix) as an `OperatorAction`, as the dashboard does, on both
backends; and the record is written in the same transaction as the change: when the record's
write fails, the change is undone, and a change refused leaves no record."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recoup.dunning.invoice import InvoiceState
from recoup.errors import StorageError
from recoup.jobs.model import HttpTarget, JobState
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.recovery.service import Dunning
from recoup.tenancy import ActionSubject, OperatorAction, issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import Api, Caller
from tests.cli.test_cli_remote_dunning import dunning_of, open_invoice
from tests.storage.test_callbacks_store import T0
from tests.storage.test_redrive_contract import failed


def operator(api: Api) -> tuple[Caller, str]:
    """A tenant whose token is labelled, and the name the run log gives that token."""
    tenant = f"t-{datetime.now(UTC):%H%M%S%f}"
    now = SystemClock().now()
    created = api.store.ensure_tenant(new_tenant(tenant, now=now))
    issued = issue_token(api.tables, tenant, now=now, label="ops-bob")
    return Caller(tenant, issued.secret, created.signing_secret), f"ops-bob ({issued.info.prefix}…)"


def dunning(api: Api) -> Dunning:
    return dunning_of(api.store)


def opened(api: Api, tenant: str, invoice_id: str) -> None:
    open_invoice(api.store, tenant, invoice_id)


def actions(api: Api, tenant: str, subject: ActionSubject, subject_id: str) -> list[str]:
    return [f"{a.action} by {a.who}" for a in api.tables.actions_on(tenant, subject, subject_id)]


def test_each_route_records_who_acted(api: Api) -> None:
    caller, who = operator(api)
    http = api.http(caller)
    dead = failed(api.store, T0, name="nightly", tenant=caller.tenant, error="HTTP 503")
    assert http.post(f"/v1/jobs/{dead}/retry").status_code == 200
    assert actions(api, caller.tenant, ActionSubject.JOB, dead) == [f"retry by {who}"]

    live = api.store.get(caller.tenant, dead)
    assert live is not None and live.state is JobState.SCHEDULED
    assert http.delete(f"/v1/jobs/{dead}").json()["state"] == "cancelled"
    assert actions(api, caller.tenant, ActionSubject.JOB, dead) == [
        f"retry by {who}",
        f"cancel by {who}",
    ]
    # Cancelled already: answered as it is, and nothing more recorded.
    assert http.delete(f"/v1/jobs/{dead}").status_code == 200
    assert len(actions(api, caller.tenant, ActionSubject.JOB, dead)) == 2

    opened(api, caller.tenant, "in_stop")
    opened(api, caller.tenant, "in_paid")
    stop = http.post("/v1/dunning/invoices/in_stop/cancel", json={"reason": "refunded"})
    assert stop.status_code == 200 and stop.json()["state"] == "cancelled", stop.text
    [stopped] = api.tables.actions_on(caller.tenant, ActionSubject.INVOICE, "in_stop")
    assert (stopped.action, stopped.who, stopped.detail) == ("stop", who, "reason: refunded")
    paid = http.post("/v1/dunning/invoices/in_paid/paid")
    assert paid.status_code == 200 and paid.json()["state"] == "recovered", paid.text
    assert actions(api, caller.tenant, ActionSubject.INVOICE, "in_paid") == [f"paid by {who}"]
    # An invoice already closed: answered as it is, nothing recorded.
    again = http.post("/v1/dunning/invoices/in_paid/cancel", json={"reason": "late"})
    assert again.status_code == 200 and again.json()["state"] == "recovered"
    assert actions(api, caller.tenant, ActionSubject.INVOICE, "in_paid") == [f"paid by {who}"]


def test_a_refused_retry_records_nothing(api: Api) -> None:
    caller, _ = operator(api)
    job = Scheduler(api.store, clock=SystemClock(), ssrf=SsrfGuard(allow_private=True)).enqueue(
        HttpTarget(url="http://127.0.0.1:9/hook"),
        delay=timedelta(hours=1),
        tenant=caller.tenant,
    )
    assert api.http(caller).post(f"/v1/jobs/{job.id}/retry").status_code == 409
    assert actions(api, caller.tenant, ActionSubject.JOB, job.id) == []


@pytest.fixture
def broken_record(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's write of an action record fails (after the change was made)."""

    def refuse(action: OperatorAction) -> None:
        raise StorageError("the action log is unwritable")

    monkeypatch.setattr(api.app.state.api.services.tables, "record_action", refuse)


@pytest.mark.usefixtures("broken_record")
def test_a_failed_record_undoes_the_change(api: Api) -> None:
    caller, _ = operator(api)
    http = api.http(caller)
    dead = failed(api.store, T0, name="nightly", tenant=caller.tenant, error="HTTP 503")
    assert http.post(f"/v1/jobs/{dead}/retry").status_code >= 500
    job = api.store.get(caller.tenant, dead)
    assert job is not None and job.state is JobState.FAILED  # not redriven after all

    opened(api, caller.tenant, "in_1")
    before = dunning(api).get(caller.tenant, "in_1")
    for post in (
        lambda: http.post("/v1/dunning/invoices/in_1/cancel", json={"reason": "refunded"}),
        lambda: http.post("/v1/dunning/invoices/in_1/paid"),
    ):
        assert post().status_code >= 500
        after = dunning(api).get(caller.tenant, "in_1")
        assert (after.state, after.version) == (InvoiceState.RETRYING, before.version)
        for attempt in after.attempts:  # the attempts' jobs left as they were, too
            attempt_job = api.store.get(caller.tenant, attempt.job_id)
            assert attempt_job is not None and attempt_job.state is JobState.SCHEDULED

    waiting = Scheduler(api.store, clock=SystemClock(), ssrf=SsrfGuard(allow_private=True))
    live = waiting.enqueue(
        HttpTarget(url="http://127.0.0.1:9/hook"), delay=timedelta(hours=1), tenant=caller.tenant
    )
    assert http.delete(f"/v1/jobs/{live.id}").status_code >= 500
    kept = api.store.get(caller.tenant, live.id)
    assert kept is not None and kept.state is JobState.SCHEDULED
    assert api.tables.actions_on(caller.tenant, ActionSubject.JOB, dead) == []
