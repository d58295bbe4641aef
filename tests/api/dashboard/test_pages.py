"""The dashboard's pages and actions, in-process on both backends: the job list searched and
paged, a job's run log, cancelling, schedules with their next occurrences, invoices and their
timelines, marking one paid, and invalid input answered with a page that names it."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from recoup.api.dashboard import jobs as job_pages
from recoup.api.dashboard.rendering import local
from recoup.dunning.invoice import InvoiceState
from recoup.jobs.model import HttpTarget, JobState
from recoup.jobs.schedules.model import CronRule, NewSchedule
from tests.api.dashboard.desk import FLAKY_ERROR, Desk, csrf_of, error_of, page_text

NEXT_LINK = re.compile(r'<a rel="next" href="([^"]+)"')
JOB_LINK = re.compile(r'<a href="/jobs/([0-9a-f-]{36})">([^<]+)</a>')


def test_the_job_list_searches_by_name_group_and_state(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.job("acme", "invoice-7", group="billing")
    desk.job("acme", "invoice-8", group="billing-eu")
    done = desk.job("acme", "report-1", after=timedelta(seconds=1))
    desk.run_for(timedelta(seconds=2))
    assert desk.scheduler.get(done.id, tenant="acme").state is JobState.SUCCEEDED

    def names(**params: str) -> set[str]:
        answer = browser.get("/jobs", params=params)
        assert answer.status_code == 200
        return {name for _, name in JOB_LINK.findall(answer.text)}

    assert names() == {"invoice-7", "invoice-8", "report-1"}
    assert names(name="invoice") == {"invoice-7", "invoice-8"}
    assert names(group="billing") == {"invoice-7"}  # a group matches exactly, not as a prefix
    assert names(state="succeeded") == {"report-1"}
    assert names(state="scheduled", name="invoice-8") == {"invoice-8"}
    assert names(name="nothing") == set()


def test_the_job_list_pages_by_cursor_through_every_job_once(
    desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(job_pages, "PAGE", 3)
    browser = desk.sign_in(desk.tenant("acme"))
    created = {desk.job("acme", f"job-{n}").id for n in range(8)}
    seen: list[str] = []
    url: str | None = "/jobs"
    pages = 0
    while url is not None:
        answer = browser.get(url.replace("&amp;", "&"))
        assert answer.status_code == 200
        seen += [job_id for job_id, _ in JOB_LINK.findall(answer.text)]
        found = NEXT_LINK.search(answer.text)
        url = found.group(1) if found else None
        pages += 1
    assert pages == 3 and len(seen) == 8 and set(seen) == created


def test_a_jobs_page_shows_every_attempt_of_its_run_log(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    job = desk.job("acme", "flaky-sync", handler="flaky")
    desk.run_for(timedelta(minutes=10))
    runs = desk.scheduler.runs(job.id, tenant="acme")
    assert [r.outcome.value for r in runs] == ["retry", "succeeded"]
    answer = browser.get(f"/jobs/{job.id}")
    table = answer.text.split('data-testid="runs"')[1].split("</table>")[0]
    rows = table.split("<tr>")[2:]  # after the header row
    assert len(rows) == 2
    assert "retry" in rows[0] and FLAKY_ERROR in rows[0]
    assert "succeeded" in rows[1] and FLAKY_ERROR not in rows[1]
    for run, row in zip(runs, rows, strict=True):
        assert run.started_at.strftime("%Y-%m-%d %H:%M:%S UTC") in row
    assert "Cancel job" not in answer.text  # a finished job offers no cancel


def test_cancelling_a_job_from_its_page(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    job = desk.job("acme", "nightly")
    page = browser.get(f"/jobs/{job.id}")
    assert "Cancel job" in page.text
    answer = browser.post(f"/jobs/{job.id}/cancel", data={"csrf": csrf_of(page.text)})
    assert answer.status_code == 303
    assert desk.scheduler.get(job.id, tenant="acme").state is JobState.CANCELLED
    after = browser.get(answer.headers["location"])
    assert "Cancel requested: the job is now cancelled" in page_text(after)
    assert "Cancel job" not in after.text


def test_schedules_show_their_next_occurrences_on_the_local_clock(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    schedule = desk.scheduler.create_schedule(
        NewSchedule(
            name="morning-sync",
            rule=CronRule(expression="0 10 * * *", timezone="America/Chicago"),
            target=HttpTarget(url="http://127.0.0.1:9/sync"),
            tenant="acme",
        )
    )
    text = page_text(browser.get("/schedules"))
    assert "morning-sync" in text and "0 10 * * *" in text
    upcoming = desk.scheduler.upcoming(schedule, job_pages.UPCOMING)
    assert len(upcoming) == job_pages.UPCOMING
    for at in upcoming:
        assert local(at, "America/Chicago") in text
    # The clock stands at 10:00 CDT on June 23: the next one is the 24th's, at 10:00 local.
    assert "2026-06-24 10:00 CDT" in text and "2026-06-23 10:00 CDT" not in text


def test_invoices_filter_by_state_and_open_on_their_timeline(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.invoice("acme", "inv_1")
    desk.invoice("acme", "inv_2")
    desk.dunning.mark_paid("acme", "inv_2")
    listed = page_text(browser.get("/invoices", params={"state": "retrying"}))
    assert "inv_1" in listed and "inv_2" not in listed
    listed = page_text(browser.get("/invoices", params={"state": "recovered"}))
    assert "inv_2" in listed and "inv_1" not in listed

    timeline = desk.dunning.timeline("acme", "inv_1")
    answer = browser.get("/invoices/inv_1")
    text = page_text(answer)
    attempts = answer.text.split('data-testid="attempts"')[1].split("</table>")[0]
    assert attempts.count("<tr>") == 1 + len(timeline.invoice.attempts)
    for attempt in timeline.invoice.attempts:
        assert f'href="/jobs/{attempt.job_id}"' in attempts
        assert local(attempt.at, "America/Chicago") in text
    for event in timeline.events:
        assert event.type in text
    assert "19.99 USD" in text and "Mark paid" in text


def test_marking_an_invoice_paid_recovers_it_and_cancels_its_attempts(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    invoice = desk.invoice("acme", "inv_1")
    page = browser.get("/invoices/inv_1")
    answer = browser.post("/invoices/inv_1/paid", data={"csrf": csrf_of(page.text)})
    assert answer.status_code == 303
    stored = desk.dunning.get("acme", "inv_1")
    assert stored.state is InvoiceState.RECOVERED and stored.recovered_by == "paid_out_of_band"
    for attempt in invoice.attempts:
        assert desk.scheduler.get(attempt.job_id, tenant="acme").state is JobState.CANCELLED
    after = page_text(browser.get(answer.headers["location"]))
    assert "Marked paid: the invoice is now recovered" in after
    assert "Mark paid" not in after


def test_stopping_dunning_cancels_the_invoice_and_its_attempts_without_a_recovery(
    desk: Desk,
) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    invoice = desk.invoice("acme", "inv_1")
    page = browser.get("/invoices/inv_1")
    assert 'data-testid="stop-dunning"' in page.text
    csrf = csrf_of(page.text)
    refused = browser.post("/invoices/inv_1/cancel", data={"csrf": csrf, "reason": "  "})
    assert refused.status_code == 422 and "reason" in page_text(refused)
    assert desk.dunning.get("acme", "inv_1").state is InvoiceState.RETRYING
    answer = browser.post(
        "/invoices/inv_1/cancel", data={"csrf": csrf, "reason": "subscription cancelled"}
    )
    assert answer.status_code == 303
    stored = desk.dunning.get("acme", "inv_1")
    assert stored.state is InvoiceState.CANCELLED and stored.recovered_by is None
    for attempt in invoice.attempts:
        assert desk.scheduler.get(attempt.job_id, tenant="acme").state is JobState.CANCELLED
    after = page_text(browser.get(answer.headers["location"]))
    assert "Dunning stopped: the invoice is now cancelled" in after
    assert "Stop dunning" not in after and "invoice.dunning_cancelled" in after


def test_stopping_dunning_needs_the_sessions_csrf_token(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.invoice("acme", "inv_1")
    answer = browser.post("/invoices/inv_1/cancel", data={"csrf": "forged", "reason": "x"})
    assert answer.status_code == 403
    assert desk.dunning.get("acme", "inv_1").state is InvoiceState.RETRYING


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/jobs?state=sleeping", "state"),
        ("/jobs?name=" + "x" * 201, "name"),
        ("/jobs?group=a%00b", "group"),
        ("/jobs?cursor=not-a-cursor", "cursor"),
        ("/invoices?state=lost", "state"),
        ("/invoices?cursor=%25%25", "cursor"),
    ],
)
def test_invalid_input_is_a_page_naming_the_field(desk: Desk, path: str, field: str) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    answer = browser.get(path)
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    assert error_of(answer).startswith(f"{field} ")


def test_an_adaptive_invoices_page_shows_each_attempts_timing_and_explanation(
    desk: Desk,
) -> None:
    from recoup.dunning.policy import preset_text

    browser = desk.sign_in(desk.tenant("acme"))
    desk.dunning.configure("acme", policy_toml=preset_text("adaptive"))
    invoice = next(
        i
        for i in (desk.invoice("acme", f"inv_{n}") for n in range(20))
        if i.attempts[0].timing is not None and i.attempts[0].timing.arm == "adaptive"
    )
    answer = browser.get(f"/invoices/{invoice.invoice_id}")
    cells = answer.text.split('data-testid="attempts"')[1].split("</table>")[0]
    assert cells.count('data-testid="attempt-timing"') == len(invoice.attempts)
    text = page_text(answer)
    for attempt in invoice.attempts:
        assert attempt.timing is not None
        assert attempt.timing.explanation in text
    assert "chosen with probability 1.00" in text  # a cold start keeps the static slot
    # A static policy's page has no timing column.
    desk.dunning.configure("acme", policy_toml=preset_text("business-days"))
    desk.invoice("acme", "static_1")
    assert "attempt-timing" not in browser.get("/invoices/static_1").text
