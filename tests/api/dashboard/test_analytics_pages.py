"""The dashboard's recovery analytics and review queue, in-process on both backends: the report
with its figures and charts, the tenant's data only, insufficient data said as such, and
tagging a flagged merchant id, which moves it out of the queue."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from recoup.analytics.recovery import CHARTS
from recoup.recovery.reporting import Reports
from tests.api.dashboard.desk import START, Desk, csrf_of, error_of, page_text

DAY = timedelta(days=1)
SVG = re.compile(r'<figure class="chart" data-testid="chart-([a-z_]+)">\s*<svg\b')


def a_small_merchant_with_a_spike(desk: Desk, tenant: str) -> None:
    """A low-volume merchant id whose last month is mostly do_not_honor, against four months
    of insufficient_funds: flagged for review."""
    desk.spread(
        tenant, "base", 150 * DAY, 30 * DAY, {"insufficient_funds": 80}, merchant_id="m-small"
    )
    desk.spread(
        tenant,
        "now",
        30 * DAY,
        0 * DAY,
        {"do_not_honor": 12, "insufficient_funds": 4},
        merchant_id="m-small",
    )


def test_the_analytics_page_shows_the_report_and_its_charts(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.tenant("rival")
    desk.a_month_of_invoices("acme")
    desk.a_month_of_invoices("rival", merchant_id="m-rival-secret")
    answer = browser.get("/analytics")
    assert answer.status_code == 200
    report, _ = Reports(desk.store, desk.clock).build("acme")
    assert report.finished == 40 and report.overall.recovered == 30 and report.running == 1
    text = page_text(answer)
    assert "75.0%" in text and "30 of 40 finished" in text
    drawn = SVG.findall(answer.text)
    assert drawn and set(drawn) <= set(CHARTS)
    assert "experiment" not in drawn  # one policy: nothing to compare
    assert {"rate_by_attempt", "rate_by_local_hour", "load_per_hour"} <= set(drawn)
    assert "m-big" in text and "m-rival-secret" not in text


def test_a_bucket_under_the_minimum_volume_says_insufficient_data(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.a_month_of_invoices("acme")
    overall = re.compile(r'data-testid="overall">([^<]+)<')
    assert overall.findall(browser.get("/analytics").text) == ["75.0%"]
    scarce = browser.get("/analytics", params={"min_volume": "41"})
    assert overall.findall(scarce.text) == ["insufficient data"]
    refused = browser.get("/analytics", params={"min_volume": "0"})
    assert refused.status_code == 422 and "min_volume" in page_text(refused)


def test_tagging_a_flagged_merchant_moves_it_out_of_the_queue(desk: Desk) -> None:
    acme, rival = desk.tenant("acme"), desk.tenant("rival")
    a_small_merchant_with_a_spike(desk, "acme")
    browser = desk.sign_in(acme)
    page = browser.get("/review")
    flagged = page.text.split('data-testid="flagged"')[1].split("</table>")[0]
    assert "m-small" in flagged and "do_not_honor" in flagged
    assert 'data-testid="suppressed"' not in page.text

    rival_view = desk.sign_in(rival).get("/review")
    assert "m-small" not in page_text(rival_view) and "Nothing flagged" in page_text(rival_view)

    answer = browser.post(
        "/review/tag",
        data={
            "csrf": csrf_of(page.text),
            "merchant_id": "m-small",
            "tag": "seasonal",
            "note": "a ski shop in July",
        },
    )
    assert answer.status_code == 303
    (stored,) = desk.store.merchant_tags("acme")
    assert (stored.merchant_id, stored.tag, stored.note) == (
        "m-small",
        "seasonal",
        "a ski shop in July",
    )
    assert stored.tagged_at == START
    assert desk.store.merchant_tags("rival") == []
    after = browser.get(answer.headers["location"])
    assert 'data-testid="flagged"' not in after.text
    suppressed = after.text.split('data-testid="suppressed"')[1].split("</table>")[0]
    assert "m-small" in suppressed and "a ski shop in July" in suppressed


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"merchant_id": "m-1", "tag": "favourite"}, "tag"),
        ({"merchant_id": "", "tag": "new"}, "merchant_id"),
        ({"merchant_id": "m" * 101, "tag": "new"}, "merchant_id"),
        ({"merchant_id": "m-1", "tag": "new", "note": "n" * 1001}, "note"),
    ],
)
def test_a_bad_tag_is_a_page_naming_the_field_and_stores_nothing(
    desk: Desk, fields: dict[str, str], field: str
) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    csrf = csrf_of(browser.get("/review").text)
    answer = browser.post("/review/tag", data={"csrf": csrf, **fields})
    assert answer.status_code == 422 and error_of(answer).startswith(f"{field} ")
    assert desk.store.merchant_tags("acme") == []


def test_tagging_needs_the_sessions_csrf_token(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    answer = browser.post("/review/tag", data={"merchant_id": "m-1", "tag": "new"})
    assert answer.status_code == 403
    assert desk.store.merchant_tags("acme") == []


def test_empty_buckets_are_left_out_unless_asked(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.a_month_of_invoices("acme")
    report, _ = Reports(desk.store, desk.clock).build("acme")
    empty_hours = sum(1 for b in report.by_local_hour if b.count == 0)
    assert empty_hours > 0  # the month's attempts land in a few local hours only
    row = re.compile(r'<td class="num">0</td>\s*<td class="num">0</td>')
    assert not row.search(browser.get("/analytics").text)
    shown = browser.get("/analytics", params={"empty": "shown"}).text
    assert len(row.findall(shown)) >= empty_hours
    assert browser.get("/analytics", params={"empty": "all"}).status_code == 422
