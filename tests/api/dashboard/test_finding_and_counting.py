"""The dashboard's search box, its money totals and its self-refreshing pages, in-process on
both backends: an id lands on its page, a name or a customer on a result list (or on the one
result), another tenant's ids find nothing; the invoices page's and the analytics page's
totals are the API's (GET /v1/dunning/report's `amounts`, /metrics' sums); a page with work
running refreshes itself without a script."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from recoup.api.dashboard.live import REFRESH_SECONDS
from tests.api.dashboard.desk import START, Desk, error_of, page_text
from tests.storage.test_redrive_contract import failed

DAY = timedelta(days=1)
MINOR = re.compile(
    r'<tr data-currency="(\w+)">(.*?)</tr>',
    re.S,
)
CELL = re.compile(r'data-kind="(\w+)" data-minor="(\d+)"')


def money_on(html: str) -> dict[str, dict[str, int]]:
    """The totals table of a page, as currency → kind → minor units."""
    return {
        currency: {kind: int(minor) for kind, minor in CELL.findall(row)}
        for currency, row in MINOR.findall(html)
    }


def test_an_invoice_id_or_a_job_id_lands_on_its_page(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.invoice("acme", "INV-2026.0042~a")  # the id alphabet's every punctuation
    job = desk.job("acme", "nightly")
    to_invoice = browser.get("/search", params={"q": " INV-2026.0042~a "})
    assert to_invoice.status_code == 303
    assert to_invoice.headers["location"] == "/invoices/INV-2026.0042~a"
    assert browser.get(to_invoice.headers["location"]).status_code == 200
    to_job = browser.get("/search", params={"q": job.id})
    assert to_job.status_code == 303 and to_job.headers["location"] == f"/jobs/{job.id}"


def test_a_name_or_a_customer_lists_what_it_may_mean_or_lands_on_the_one(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.job("acme", "sync-a")
    desk.job("acme", "sync-b")
    only = desk.job("acme", "lonely-job")
    desk.invoice("acme", "inv_c1")  # customer cus_inv_c1

    listed = browser.get("/search", params={"q": "sync-"})
    assert listed.status_code == 200
    text = page_text(listed)
    assert "sync-a" in text and "sync-b" in text and "lonely-job" not in text
    lone = browser.get("/search", params={"q": "lonely"})
    assert lone.headers["location"] == f"/jobs/{only.id}"
    customer = browser.get("/search", params={"q": "cus_inv_c1"})
    assert customer.headers["location"] == "/invoices/inv_c1"


def test_another_tenants_ids_and_names_find_nothing(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.tenant("rival")
    theirs = desk.job("rival", "rival-secret-job")
    desk.invoice("rival", "inv_rival")
    for q in (theirs.id, "rival-secret", "inv_rival", "cus_inv_rival"):
        answer = browser.get("/search", params={"q": q})
        assert answer.status_code == 200, q
        assert "Nothing here is called" in page_text(answer)
        assert "rival-secret-job" not in answer.text.replace(q, "")


def test_a_search_is_escaped_and_bounded(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    answer = browser.get("/search", params={"q": "<script>alert(1)</script>"})
    assert "<script>alert(1)" not in answer.text and "&lt;script&gt;" in answer.text
    too_long = browser.get("/search", params={"q": "x" * 201})
    assert too_long.status_code == 422 and error_of(too_long).startswith("q")
    assert browser.get("/search").status_code == 200  # the empty box


def test_the_totals_are_the_reports_amounts_and_the_metrics_sums(desk: Desk) -> None:
    token = desk.tenant("acme")
    browser = desk.sign_in(token)
    desk.a_month_of_invoices("acme")  # 30 recovered, 10 exhausted (10.00 USD each), 1 running
    desk.invoice("acme", "inv_more", amount=500, failed_at=START - DAY)
    desk.tenant("rival")
    desk.invoice("rival", "inv_rival", amount=77_777, failed_at=START - DAY)

    shown = money_on(browser.get("/invoices").text)
    api = desk.browser()
    headers = {"Authorization": f"Bearer {token}"}
    report = api.get("/v1/dunning/report", headers=headers).json()
    assert shown == report["amounts"]
    assert shown["usd"] == {
        "recovered": 30 * 1000,
        "at_risk": 1999 + 500,  # the running invoice and inv_more
        "lost": 10 * 1000,
        "stopped": 0,
    }
    assert money_on(browser.get("/analytics").text) == report["amounts"]
    metrics = api.get("/metrics").text
    for kind, minor in shown["usd"].items():
        if minor:
            line = f'recoup_dunning_amount_minor{{currency="usd",kind="{kind}",tenant="acme"}}'
            assert f"{line} {float(minor)}" in metrics


def test_the_totals_period_narrows_the_invoices_counted(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.finished("acme", "old", START - 20 * DAY, recovered=True)
    desk.finished("acme", "new", START - 2 * DAY, recovered=True)
    assert money_on(browser.get("/invoices", params={"days": "7"}).text) == {
        "usd": {"recovered": 1000, "at_risk": 0, "lost": 0, "stopped": 0}
    }
    assert (
        money_on(browser.get("/invoices", params={"days": "30"}).text)["usd"]["recovered"] == 2000
    )
    bad = browser.get("/invoices", params={"days": "3"})
    assert bad.status_code == 422 and error_of(bad).startswith("days")


def test_a_job_about_to_run_refreshes_its_page_until_asked_not_to(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    soon = desk.job("acme", "soon", after=timedelta(seconds=20))
    later = desk.job("acme", "later", after=timedelta(hours=2))
    page = browser.get(f"/jobs/{soon.id}", params={"notice": "cancelled"})
    refresh = re.search(r'<meta http-equiv="refresh" content="(\d+); url=([^"]*)">', page.text)
    assert refresh and refresh.group(1) == str(REFRESH_SECONDS)
    assert refresh.group(2) == f"/jobs/{soon.id}"  # the one-off notice is not repeated
    assert "script" not in page.headers["content-security-policy"]
    assert 'http-equiv="refresh"' not in browser.get(f"/jobs/{later.id}").text
    paused = browser.get(f"/jobs/{soon.id}", params={"live": "off"})
    assert 'http-equiv="refresh"' not in paused.text
    assert "Refreshing stopped." in page_text(paused)
    assert 'http-equiv="refresh"' in browser.get("/jobs").text  # a listed job is due
    bad = browser.get(f"/jobs/{soon.id}", params={"live": "maybe"})
    assert bad.status_code == 422 and error_of(bad).startswith("live")


def test_a_job_that_ended_does_not_refresh(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    job_id = failed(desk.store, START - DAY, name="dead", tenant="acme")
    assert 'http-equiv="refresh"' not in browser.get(f"/jobs/{job_id}").text


@pytest.mark.parametrize("days", ["", "7", "365"])
def test_the_invoices_page_opens_for_each_period(desk: Desk, days: str) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    answer = browser.get("/invoices", params={"days": days})
    assert answer.status_code == 200 and "No invoice failed in that window." in page_text(answer)
