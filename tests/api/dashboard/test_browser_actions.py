"""The dashboard's actions, search and totals in a real headless browser (Debian's chromium
through Playwright, found as `test_browser.py` finds it): retry a failed job, cancel a
scheduled one, stop an invoice's dunning and mark one paid, a bulk retry through its count and
confirmation, search by id, and the totals checked against the API's own figures. Script
payloads are in the names and the reasons typed: no dialog may ever open.

With `RECOUP_SCREENSHOTS=<directory>` the tests also save the pages the docs show there
(`docs/images/dashboard/`: the invoices page, an invoice, a job's run log, the report).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from recoup.dunning.invoice import InvoiceState
from recoup.jobs.model import JobState
from recoup.storage import open_store
from tests.api.dashboard.desk import START, Desk, make_desk
from tests.api.dashboard.test_browser import WAIT_MS, playwright_api, sign_in
from tests.storage.test_redrive_contract import failed
from tests.support import ServerThread

expect = playwright_api.expect

SCRIPT = '<script>alert("xss")</script>'
SHOTS = os.environ.get("RECOUP_SCREENSHOTS")
HOUR = timedelta(hours=1)


@dataclass
class Site:
    url: str
    desk: Desk
    token: str
    dead_id: str
    to_cancel_id: str
    batch_ids: list[str]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("dashboard-actions")
    store = open_store(f"sqlite:///{folder / 'recoup.db'}")
    desk = make_desk(store)
    token = desk.tenant("acme", label="ops-alice")
    desk.tenant("rival")
    flaky = desk.job("acme", "flaky-sync", handler="flaky")
    desk.run_for(timedelta(minutes=10))  # flaky-sync: a retry, then success
    assert desk.scheduler.get(flaky.id, tenant="acme").state is JobState.SUCCEEDED
    dead = failed(desk.store, START - HOUR, name="nightly-export", tenant="acme", error="HTTP 503")
    to_cancel = desk.job("acme", "to-cancel", after=timedelta(hours=3))
    batch = [
        failed(desk.store, START - n * HOUR, name=f"batch-{n}", group="batch", tenant="acme")
        for n in (1, 2, 3)
    ]
    desk.job("acme", SCRIPT, group="batch", after=timedelta(hours=3))  # live: not retried
    desk.a_month_of_invoices("acme")
    desk.invoice("acme", "inv_stop", amount=4200, failed_at=START - 2 * HOUR)
    desk.invoice("acme", "inv_paid", amount=1250, failed_at=START - 2 * HOUR)
    desk.invoice("rival", "inv_rival", amount=99_999, failed_at=START - HOUR)
    with ServerThread(desk.app) as server:
        yield Site(server.url, desk, token, dead, to_cancel.id, batch)
    store.close()


@pytest.fixture
def page(chromium: playwright_api.Browser, site: Site) -> Iterator[playwright_api.Page]:
    context = chromium.new_context(base_url=site.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    dialogs: list[str] = []
    opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    yield opened
    context.close()
    assert dialogs == [], "a script ran on a dashboard page"


def shoot(page: playwright_api.Page, name: str, *, whole: bool = True) -> None:
    """Save the page (`whole`: all of it, else what the window shows) under `SHOTS`."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / name), full_page=whole)


def find(page: playwright_api.Page, text: str) -> None:
    box = page.get_by_role("search")  # the header's, on every page
    box.get_by_role("searchbox", name="Find").fill(text)
    box.get_by_role("button", name="Find").click()


def test_retrying_a_failed_job_found_by_its_name(page: playwright_api.Page, site: Site) -> None:
    sign_in(page, site.token)
    expect(page.get_by_test_id("who")).to_contain_text("ops-alice")
    find(page, "nightly-export")  # one job of that name: the search lands on it
    expect(page.get_by_role("heading", name="nightly-export")).to_be_visible()
    expect(page.get_by_test_id("job-state")).to_have_text("failed")
    page.get_by_role("button", name="Retry job").click()
    expect(page.get_by_role("status")).to_contain_text("Retried: the job is now scheduled")
    expect(page.get_by_test_id("job-state")).to_have_text("scheduled")
    marker = page.get_by_test_id("run-marker")
    expect(marker).to_have_count(1)
    expect(marker).to_contain_text("Retried by ops-alice")
    assert site.desk.scheduler.get(site.dead_id, tenant="acme").state is JobState.SCHEDULED


def test_a_jobs_run_log_in_words(page: playwright_api.Page, site: Site) -> None:
    sign_in(page, site.token)
    page.get_by_role("link", name="flaky-sync").click()
    rows = page.get_by_test_id("runs").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("tried again at")
    shoot(page, "job-run-log.png")


def test_cancelling_a_scheduled_job(page: playwright_api.Page, site: Site) -> None:
    sign_in(page, site.token)
    page.get_by_role("link", name="to-cancel").click()
    expect(page.get_by_test_id("job-state")).to_have_text("scheduled")
    page.get_by_role("button", name="Cancel job").click()
    expect(page.get_by_test_id("job-state")).to_have_text("cancelled")
    expect(page.get_by_test_id("run-marker")).to_contain_text("Cancelled by ops-alice")
    assert site.desk.scheduler.get(site.to_cancel_id, tenant="acme").state is JobState.CANCELLED


def test_stopping_an_invoice_and_marking_one_paid(page: playwright_api.Page, site: Site) -> None:
    sign_in(page, site.token)
    find(page, "inv_stop")
    expect(page.get_by_role("heading", name="Invoice inv_stop")).to_be_visible()
    expect(page.get_by_test_id("invoice-state")).to_have_text("retrying")
    page.get_by_label("Reason").fill(SCRIPT)
    page.get_by_role("button", name="Stop dunning").click()
    expect(page.get_by_test_id("invoice-state")).to_have_text("cancelled")
    done = page.get_by_test_id("actions")
    expect(done).to_contain_text("Dunning stopped by ops-alice")
    expect(done).to_contain_text(SCRIPT)  # shown as the text it is
    assert site.desk.dunning.get("acme", "inv_stop").state is InvoiceState.CANCELLED

    find(page, "inv_paid")
    page.get_by_role("button", name="Mark paid").click()
    expect(page.get_by_test_id("invoice-state")).to_have_text("recovered")
    expect(page.get_by_test_id("actions")).to_contain_text("Marked paid by ops-alice")
    assert site.desk.dunning.get("acme", "inv_paid").state is InvoiceState.RECOVERED
    shoot(page, "invoice.png")


def test_a_bulk_retry_shows_its_count_and_asks_first(page: playwright_api.Page, site: Site) -> None:
    sign_in(page, site.token)
    page.goto("/jobs?group=batch")
    expect(page.get_by_test_id("jobs").locator("tbody tr")).to_have_count(4)
    page.get_by_label("Every job of this filter").select_option("retry")
    page.get_by_role("button", name="Count…").click()
    expect(page.get_by_test_id("bulk-count")).to_contain_text("3 job(s) match.")
    states = {site.desk.scheduler.get(j, tenant="acme").state for j in site.batch_ids}
    assert states == {JobState.FAILED}  # counted, not yet done
    page.get_by_role("button", name="Retry: 3 job(s)").click()
    expect(page.get_by_test_id("bulk-done")).to_contain_text("Retry: 3 job(s) changed.")
    states = {site.desk.scheduler.get(j, tenant="acme").state for j in site.batch_ids}
    assert states == {JobState.SCHEDULED}


def test_search_by_id_lands_on_the_thing_and_finds_nothing_of_another_tenant(
    page: playwright_api.Page, site: Site
) -> None:
    sign_in(page, site.token)
    find(page, site.to_cancel_id)
    expect(page).to_have_url(re.compile(f"/jobs/{site.to_cancel_id}$"))
    find(page, "cus_inv_paid")  # a customer id: its one invoice
    expect(page.get_by_role("heading", name="Invoice inv_paid")).to_be_visible()
    find(page, "batch-")  # the start of several jobs' names: a list
    expect(page.get_by_test_id("found-jobs").locator("tbody tr")).to_have_count(3)
    find(page, "inv_rival")
    expect(page.get_by_test_id("no-result")).to_be_visible()


def totals_of(page: playwright_api.Page) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for row in page.get_by_test_id("money").locator("tbody tr").all():
        currency = row.get_attribute("data-currency") or ""
        found[currency] = {
            cell.get_attribute("data-kind") or "": int(cell.get_attribute("data-minor") or "")
            for cell in row.locator("td[data-kind]").all()
        }
    return found


def test_the_totals_are_the_apis_figures(page: playwright_api.Page, site: Site) -> None:
    sign_in(page, site.token)
    page.get_by_role("link", name="Invoices", exact=True).click()
    expect(page.get_by_test_id("money")).to_be_visible()
    shown = totals_of(page)
    answer = page.request.get(
        "/v1/dunning/report", headers={"Authorization": f"Bearer {site.token}"}
    )
    assert answer.ok
    assert shown == answer.json()["amounts"]
    assert shown["usd"]["recovered"] >= 30 * 1000 and shown["usd"]["lost"] == 10 * 1000
    assert "99,999" not in page.locator("main").inner_text()  # the other tenant's invoice
    expect(page.get_by_test_id("money").locator("td.recovered")).to_have_text(
        f"{shown['usd']['recovered'] / 100:.2f} USD"
    )
    shoot(page, "invoices.png", whole=False)

    page.get_by_role("link", name="Analytics").click()
    expect(page.get_by_test_id("money")).to_be_visible()
    assert totals_of(page) == answer.json()["amounts"]
    shoot(page, "report.png", whole=False)
