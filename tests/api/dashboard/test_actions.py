"""The dashboard's actions, in-process on both backends: retry a failed job, cancel a live one,
stop an invoice's dunning, mark one paid, each behind the session's CSRF token and the tenant
check, each recorded with the token that did it and shown in the run log or the timeline; and
their bulk versions over a filter, counted and confirmed first."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from recoup.api.dashboard import bulk
from recoup.dunning.invoice import InvoiceState
from recoup.jobs.model import JobState
from recoup.tenancy import ActionSubject
from tests.api.dashboard.desk import START, Desk, csrf_of, error_of, page_text
from tests.storage.test_redrive_contract import failed

HOUR = timedelta(hours=1)
SCRIPT = "<script>alert(1)</script>"


def who_of(token: str, label: str) -> str:
    return f"{label} ({token[:12]}…)"


def test_retrying_a_failed_job_schedules_it_and_the_run_log_says_who(desk: Desk) -> None:
    token = desk.tenant("acme", label="ops-alice")
    browser = desk.sign_in(token)
    job_id = failed(desk.store, START - HOUR, name="nightly-sync", tenant="acme")

    page = browser.get(f"/jobs/{job_id}")
    assert "Retry job" in page_text(page) and "Cancel job" not in page_text(page)
    assert browser.post(f"/jobs/{job_id}/retry", data={}).status_code == 403
    assert desk.scheduler.get(job_id, tenant="acme").state is JobState.FAILED

    done = browser.post(f"/jobs/{job_id}/retry", data={"csrf": csrf_of(page.text)})
    assert done.status_code == 303
    after = page_text(browser.get(done.headers["location"]))
    assert "Retried: the job is now scheduled" in after
    assert desk.scheduler.get(job_id, tenant="acme").state is JobState.SCHEDULED
    assert f"Retried by {who_of(token, 'ops-alice')}: scheduled again now" in after
    assert "redriven: scheduled again" not in after  # the action's marker stands for it
    assert [a.action for a in desk.tables.actions_on("acme", ActionSubject.JOB, job_id)] == [
        "retry"
    ]

    again = browser.post(f"/jobs/{job_id}/retry", data={"csrf": csrf_of(page.text)})
    refused = page_text(browser.get(again.headers["location"]))
    assert "Not retried:" in refused and "only a failed job can be retried" in refused
    assert len(desk.tables.actions_on("acme", ActionSubject.JOB, job_id)) == 1


def test_cancelling_a_job_is_recorded_once_with_who_did_it(desk: Desk) -> None:
    token = desk.tenant("acme")  # no label: the token's prefix names it
    browser = desk.sign_in(token)
    job = desk.job("acme", "to-cancel")
    csrf = csrf_of(browser.get(f"/jobs/{job.id}").text)

    done = browser.post(f"/jobs/{job.id}/cancel", data={"csrf": csrf})
    after = page_text(browser.get(done.headers["location"]))
    assert desk.scheduler.get(job.id, tenant="acme").state is JobState.CANCELLED
    assert f"Cancelled by token {token[:12]}…" in after
    twice = browser.post(f"/jobs/{job.id}/cancel", data={"csrf": csrf})
    assert "Nothing to do: the job is cancelled." in page_text(
        browser.get(twice.headers["location"])
    )
    assert len(desk.tables.actions_on("acme", ActionSubject.JOB, job.id)) == 1


def test_stopping_and_marking_paid_say_who_in_the_invoices_timeline(desk: Desk) -> None:
    token = desk.tenant("acme", label=SCRIPT)  # a label is the tenant's own text
    browser = desk.sign_in(token)
    desk.invoice("acme", "inv_stop")
    desk.invoice("acme", "inv_paid")
    csrf = csrf_of(browser.get("/invoices/inv_stop").text)

    missing = browser.post("/invoices/inv_stop/cancel", data={"csrf": csrf})
    assert missing.status_code == 422 and error_of(missing).startswith("reason")
    stop = browser.post("/invoices/inv_stop/cancel", data={"csrf": csrf, "reason": SCRIPT})
    stopped = browser.get(stop.headers["location"])
    assert desk.dunning.get("acme", "inv_stop").state is InvoiceState.CANCELLED
    assert SCRIPT not in stopped.text and "&lt;script&gt;" in stopped.text
    assert f"Dunning stopped by {who_of(token, SCRIPT)} (reason: {SCRIPT})." in page_text(
        stopped
    ).replace("&lt;", "<").replace("&gt;", ">")

    paid = browser.post("/invoices/inv_paid/paid", data={"csrf": csrf})
    shown = page_text(browser.get(paid.headers["location"]))
    assert desk.dunning.get("acme", "inv_paid").state is InvoiceState.RECOVERED
    assert "Marked paid by" in shown and "Done by hand" in shown
    again = browser.post("/invoices/inv_paid/paid", data={"csrf": csrf})
    assert "Nothing to do" in page_text(browser.get(again.headers["location"]))
    assert len(desk.tables.actions_on("acme", ActionSubject.INVOICE, "inv_paid")) == 1


def test_every_action_on_another_tenants_job_or_invoice_is_a_404(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.tenant("rival")
    live = desk.job("rival", "rival-live")
    dead = failed(desk.store, START - HOUR, name="rival-dead", tenant="rival")
    desk.invoice("rival", "inv_rival")
    csrf = csrf_of(browser.get("/jobs").text)
    for path, data in (
        (f"/jobs/{live.id}/cancel", {}),
        (f"/jobs/{dead}/retry", {}),
        ("/invoices/inv_rival/paid", {}),
        ("/invoices/inv_rival/cancel", {"reason": "mine now"}),
    ):
        assert browser.post(path, data={"csrf": csrf, **data}).status_code == 404, path
    assert desk.scheduler.get(live.id, tenant="rival").state is JobState.SCHEDULED
    assert desk.scheduler.get(dead, tenant="rival").state is JobState.FAILED
    assert desk.dunning.get("rival", "inv_rival").state is InvoiceState.RETRYING
    for tenant in ("acme", "rival"):
        for subject, ids in (
            (ActionSubject.JOB, (live.id, dead)),
            (ActionSubject.INVOICE, ("inv_rival",)),
        ):
            assert all(desk.tables.actions_on(tenant, subject, i) == [] for i in ids)


def test_a_bulk_retry_counts_confirms_then_retries_each_job_of_the_filter(desk: Desk) -> None:
    token = desk.tenant("acme", label="ops")
    browser = desk.sign_in(token)
    desk.tenant("rival")
    mine = [failed(desk.store, START - n * HOUR, group="g", tenant="acme") for n in (1, 2, 3)]
    other_group = failed(desk.store, START - HOUR, group="h", tenant="acme")
    theirs = failed(desk.store, START - HOUR, group="g", tenant="rival")
    live = desk.job("acme", "live-one", group="g")  # not failed: a retry leaves it alone

    listing = browser.get("/jobs", params={"group": "g"})
    assert 'action="/bulk/jobs"' in listing.text
    counted = browser.get("/bulk/jobs", params={"action": "retry", "group": "g"})
    assert "3 job(s) match." in page_text(counted)
    assert "Retry: 3 job(s)" in page_text(counted)
    assert {desk.scheduler.get(j, tenant="acme").state for j in mine} == {JobState.FAILED}

    form = {"action": "retry", "group": "g", "name": "", "state": "", "schedule": ""}
    assert browser.post("/bulk/jobs", data=form).status_code == 403
    done = browser.post("/bulk/jobs", data={**form, "csrf": csrf_of(counted.text)})
    assert done.status_code == 303
    after = page_text(browser.get(done.headers["location"]))
    assert "Retry: 3 job(s) changed." in after
    assert {desk.scheduler.get(j, tenant="acme").state for j in mine} == {JobState.SCHEDULED}
    assert desk.scheduler.get(other_group, tenant="acme").state is JobState.FAILED
    assert desk.scheduler.get(theirs, tenant="rival").state is JobState.FAILED
    assert desk.scheduler.get(live.id, tenant="acme").state is JobState.SCHEDULED
    [record] = desk.tables.actions_on("acme", ActionSubject.JOB, mine[0])
    assert record.who == who_of(token, "ops")
    assert record.detail == "bulk retry of 3 job(s): group 'g'"
    assert "bulk retry of 3 job(s)" in page_text(browser.get(f"/jobs/{mine[0]}"))


def test_a_bulk_cancel_takes_the_live_jobs_of_a_name_prefix(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    doomed = [desk.job("acme", f"sync-{n}") for n in range(2)]
    kept = desk.job("acme", "other-1")
    ended = failed(desk.store, START - HOUR, name="sync-dead", tenant="acme")
    counted = browser.get("/bulk/jobs", params={"action": "cancel", "name": "sync-"})
    assert "2 job(s) match." in page_text(counted)
    form = {"action": "cancel", "name": "sync-", "csrf": csrf_of(counted.text)}
    after = page_text(browser.get(browser.post("/bulk/jobs", data=form).headers["location"]))
    assert "Cancel: 2 job(s) changed." in after
    assert {desk.scheduler.get(j.id, tenant="acme").state for j in doomed} == {JobState.CANCELLED}
    assert desk.scheduler.get(kept.id, tenant="acme").state is JobState.SCHEDULED
    assert desk.scheduler.get(ended, tenant="acme").state is JobState.FAILED


def test_a_bulk_stop_needs_a_reason_and_stops_only_the_filters_open_invoices(
    desk: Desk,
) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.invoice("acme", "inv_a")
    desk.invoice("acme", "inv_b")
    desk.finished("acme", "inv_done", START - 3 * 24 * HOUR, recovered=True)
    counted = browser.get("/bulk/invoices", params={"action": "stop", "state": ""})
    assert "2 invoice(s) match." in page_text(counted)
    form = {"action": "stop", "state": "", "customer": "", "csrf": csrf_of(counted.text)}
    missing = browser.post("/bulk/invoices", data=form)
    assert missing.status_code == 422 and error_of(missing).startswith("reason")
    done = browser.post("/bulk/invoices", data={**form, "reason": "customer left"})
    assert "Stop dunning: 2 invoice(s) changed." in page_text(browser.get(done.headers["location"]))
    assert desk.dunning.get("acme", "inv_a").state is InvoiceState.CANCELLED
    assert desk.dunning.get("acme", "inv_done").state is InvoiceState.RECOVERED
    [record] = desk.tables.actions_on("acme", ActionSubject.INVOICE, "inv_b")
    assert record.detail == "reason: customer left; bulk stop of 2 invoice(s): every invoice"


def test_a_bulk_mark_paid_by_customer(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.invoice("acme", "inv_x")
    desk.invoice("acme", "inv_y")  # another customer (cus_inv_y)
    params = {"action": "paid", "customer": "cus_inv_x"}
    counted = browser.get("/bulk/invoices", params=params)
    assert "1 invoice(s) match." in page_text(counted)
    done = browser.post("/bulk/invoices", data={**params, "csrf": csrf_of(counted.text)})
    assert "Mark paid: 1 invoice(s) changed." in page_text(browser.get(done.headers["location"]))
    assert desk.dunning.get("acme", "inv_x").state is InvoiceState.RECOVERED
    assert desk.dunning.get("acme", "inv_y").state is InvoiceState.RETRYING


def test_a_filter_naming_more_than_a_bulk_takes_asks_to_be_narrowed(
    desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BULK_MAX", 2)
    browser = desk.sign_in(desk.tenant("acme"))
    jobs = [desk.job("acme", f"many-{n}") for n in range(3)]
    counted = browser.get("/bulk/jobs", params={"action": "cancel", "name": "many-"})
    assert "More than 2 jobs match: narrow the filter" in page_text(counted)
    assert 'action="/bulk/jobs"' not in counted.text  # no confirmation to press
    form = {"action": "cancel", "name": "many-", "csrf": csrf_of(browser.get("/jobs").text)}
    refused = browser.post("/bulk/jobs", data=form)
    assert refused.status_code == 422 and "narrow it" in error_of(refused)
    assert {desk.scheduler.get(j.id, tenant="acme").state for j in jobs} == {JobState.SCHEDULED}


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/bulk/jobs", {"action": "delete"}, "action"),
        ("/bulk/jobs", {}, "action"),
        ("/bulk/jobs", {"action": "retry", "state": "dead"}, "state"),
        ("/bulk/invoices", {"action": "retry"}, "action"),
        ("/bulk/invoices", {"action": "stop", "state": "lost"}, "state"),
        ("/bulk/invoices", {"action": "paid", "customer": "x" * 101}, "customer"),
    ],
)
def test_a_bad_bulk_filter_is_a_page_naming_the_field(
    desk: Desk, path: str, params: dict[str, str], field: str
) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    answer = browser.get(path, params=params)
    assert answer.status_code == 422
    assert error_of(answer).startswith(field)


def test_the_header_names_who_is_signed_in(desk: Desk) -> None:
    token = desk.tenant("acme", label="ops-alice")
    shown = desk.sign_in(token).get("/jobs")
    found = re.search(r'data-testid="who">([^<]*)<', shown.text)
    assert found and found.group(1) == who_of(token, "ops-alice")
    assert token not in shown.text  # the secret is never on a page
