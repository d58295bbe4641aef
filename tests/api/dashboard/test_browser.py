"""The dashboard in a real headless browser: Debian's chromium (installed by .ci/run, never
downloaded at run time) driven by Playwright, against the app served by uvicorn on loopback.

One browser and one server per module; each test gets a fresh browser context (no cookies).
Without chromium the tests skip, saying why; under CI=true they fail instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from recoup.jobs.model import JobState
from recoup.storage import open_store
from tests.api.dashboard.desk import FLAKY_ERROR, Desk, make_desk
from tests.support import ServerThread

try:
    from playwright import sync_api as playwright_api
except ModuleNotFoundError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("playwright is in the dev extra (pip install -e '.[dev]')", allow_module_level=True)
expect = playwright_api.expect

WAIT_MS = 15_000  # what an assertion waits for the page (a loaded machine is slow)


@dataclass
class Site:
    url: str
    desk: Desk
    acme_token: str
    rival_token: str
    flaky_id: str
    to_cancel_id: str
    rival_job_id: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("dashboard")
    store = open_store(f"sqlite:///{folder / 'recoup.db'}")
    desk = make_desk(store)
    acme, rival = desk.tenant("acme"), desk.tenant("rival")
    flaky = desk.job("acme", "flaky-sync", handler="flaky")
    desk.run_for(timedelta(minutes=10))
    to_cancel = desk.job("acme", "to-cancel")
    rival_job = desk.job("rival", "rival-secret-job")
    desk.invoice("acme", "inv_acme")
    desk.invoice("rival", "inv_rival_secret")
    desk.a_month_of_invoices("acme")
    desk.a_month_of_invoices("rival", merchant_id="m-rival-secret")
    with ServerThread(desk.app) as server:
        yield Site(server.url, desk, acme, rival, flaky.id, to_cancel.id, rival_job.id)
    store.close()


@pytest.fixture
def page(chromium: playwright_api.Browser, site: Site) -> Iterator[playwright_api.Page]:
    context = chromium.new_context(base_url=site.url)
    context.set_default_timeout(WAIT_MS)
    yield context.new_page()
    context.close()


def sign_in(page: playwright_api.Page, token: str) -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login\?"))
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()


def test_signing_in_opens_the_pages(page: playwright_api.Page, site: Site) -> None:
    page.goto("/jobs")
    page.get_by_label("API token").fill("rcp_" + "A" * 43)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not an active API token")

    page.get_by_label("API token").fill(site.acme_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("tenant")).to_have_text("acme")
    expect(page.get_by_role("link", name="flaky-sync")).to_be_visible()

    page.get_by_role("link", name="Schedules").click()
    expect(page.get_by_role("heading", name="Schedules")).to_be_visible()
    page.get_by_role("link", name="Invoices", exact=True).click()
    page.get_by_role("link", name="inv_acme").click()
    expect(page.get_by_role("heading", name="Events")).to_be_visible()
    expect(page.get_by_test_id("invoice-state")).to_have_text("retrying")


def test_a_jobs_run_log_opens(page: playwright_api.Page, site: Site) -> None:
    sign_in(page, site.acme_token)
    page.get_by_role("link", name="flaky-sync").click()
    rows = page.get_by_test_id("runs").locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("retry")
    expect(rows.nth(0)).to_contain_text(FLAKY_ERROR)
    expect(rows.nth(1)).to_contain_text("succeeded")


def test_cancelling_a_job_changes_its_state(page: playwright_api.Page, site: Site) -> None:
    sign_in(page, site.acme_token)
    page.get_by_role("link", name="to-cancel").click()
    expect(page.get_by_test_id("job-state")).to_have_text("scheduled")
    page.get_by_role("button", name="Cancel job").click()
    expect(page.get_by_test_id("job-state")).to_have_text("cancelled")
    expect(page.get_by_role("status")).to_contain_text("now cancelled")
    assert site.desk.scheduler.get(site.to_cancel_id, tenant="acme").state is JobState.CANCELLED


def test_a_chart_renders_on_the_analytics_page(page: playwright_api.Page, site: Site) -> None:
    sign_in(page, site.acme_token)
    page.get_by_role("link", name="Analytics").click()
    expect(page.get_by_test_id("overall")).to_have_text("75.0%")
    chart = page.get_by_test_id("chart-rate_by_attempt").locator("svg")
    expect(chart).to_be_visible()
    box = chart.bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] > 100
    expect(chart.locator("text").first).to_be_attached()  # matplotlib kept its labels as text


def test_another_tenants_data_is_never_shown(
    chromium: playwright_api.Browser, page: playwright_api.Page, site: Site
) -> None:
    sign_in(page, site.acme_token)
    for path in ("/jobs", "/jobs?name=rival", "/invoices", "/schedules", "/analytics", "/review"):
        page.goto(path)
        body = page.locator("main")
        expect(body).to_be_visible()
        text = body.inner_text()
        for secret in ("rival-secret-job", "inv_rival_secret", "m-rival-secret"):
            assert secret not in text, path
    answer = page.goto(f"/jobs/{site.rival_job_id}")
    assert answer is not None and answer.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    answer = page.goto("/invoices/inv_rival_secret")
    assert answer is not None and answer.status == 404

    rival = chromium.new_context(base_url=site.url)  # the data is there, for its own tenant
    try:
        rival_page = rival.new_page()
        rival_page.set_default_timeout(WAIT_MS)
        sign_in(rival_page, site.rival_token)
        expect(rival_page.get_by_role("link", name="rival-secret-job")).to_be_visible()
        expect(rival_page.get_by_role("link", name="flaky-sync")).to_have_count(0)
    finally:
        rival.close()


def test_the_email_preview_opens_with_the_html_part_rendered(
    page: playwright_api.Page, site: Site
) -> None:
    sign_in(page, site.acme_token)
    page.get_by_role("link", name="Emails").click()
    expect(page.get_by_role("heading", name="Emails")).to_be_visible()
    page.get_by_label("Email").select_option("final_warning")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_test_id("email-subject")).to_contain_text("Action needed: last try")
    frame = page.frame_locator("[data-testid=email-html]")
    button = frame.get_by_role("link", name="Update your card")
    expect(button).to_be_visible()
    box = button.bounding_box()
    assert box is not None and box["width"] > 100  # drawn as a button, not a bare link
    expect(frame.locator("body")).to_contain_text("your access will be paused")
    expect(page.get_by_test_id("email-text")).to_contain_text("one last try on")
