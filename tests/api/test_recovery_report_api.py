"""The recovery report's routes over real HTTP, on both backends, on a virtual clock: the report
(JSON and HTML), merchant tags, the review queue, the experiment settings, and the Python
client's calls for them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import httpx
import pytest

from recoup.analytics.recovery import TAG_KINDS
from recoup.api.app import create_app
from recoup.client import Client, Unprocessable
from recoup.dunning.invoice import Invoice, InvoiceEvent, InvoiceState, event_id
from recoup.recovery.policies import ARM_B_NAME
from recoup.storage import Store
from recoup.timekeeping.clock import VirtualClock
from recoup.wire.reports import TagIn
from tests.api.conftest import Api, Caller, api_settings
from tests.support import ServerThread

NOW = datetime(2026, 7, 1, tzinfo=UTC)
DAY = timedelta(days=1)
EVENING = """
name = "evening"
gaps = [{ business_days = 2 }, { business_days = 2 }]
[window]
start = "18:00"
"""


@dataclass
class Served:
    api: Api
    clock: VirtualClock
    caller: Caller
    http: httpx.Client


@pytest.fixture
def served(store: Store, tables: Any) -> Iterator[Served]:
    clock = VirtualClock(NOW)
    app = create_app(store, clock=clock, settings=api_settings())
    with ServerThread(app) as server:
        api = Api(server.url, store, tables, app)
        caller = api.tenant("acme")
        yield Served(api, clock, caller, api.http(caller))
        for client in api.clients:
            client.close()


def finished(invoice_id: str, failed_at: datetime, code: str, **fields: Any) -> Invoice:
    """An invoice opened by `code` and given up (no attempt): one charge outcome."""
    values: dict[str, Any] = {
        "tenant": "acme",
        "invoice_id": invoice_id,
        "customer_id": f"cus-{invoice_id}",
        "amount": 1000,
        "currency": "usd",
        "failed_at": failed_at,
        "timezone": "UTC",
        "country": None,
        "decline_code": code,
        "advice_code": None,
        "card_fingerprint": None,
        "card_network": None,
        "gateway": "gw-a",
        "merchant_id": "m-small",
        "charge_url": "https://billing.example/charge",
        "policy": "business-days",
        "state": InvoiceState.EXHAUSTED,
        "decision": "retry",
        "reason": "test",
        "final_action": "leave_past_due",
        "attempts": (),
        "created_at": failed_at,
        "updated_at": failed_at,
    }
    values.update(fields)
    return Invoice(**values)


def spread(prefix: str, start: datetime, end: datetime, codes: dict[str, int]) -> list[Invoice]:
    total = sum(codes.values())
    step = (end - start) / total
    flat = [code for code, n in codes.items() for _ in range(n)]
    return [finished(f"{prefix}-{i}", start + i * step, code) for i, code in enumerate(flat)]


def small_merchant_with_a_spike(store: Store) -> None:
    """A low-volume merchant id (fewer than 30 outcomes a week) whose last month is mostly
    do_not_honor, against months of insufficient_funds: flagged for review."""
    invoices = spread("base", NOW - 150 * DAY, NOW - 30 * DAY, {"insufficient_funds": 80})
    invoices += spread("now", NOW - 30 * DAY, NOW, {"do_not_honor": 12, "insufficient_funds": 4})
    for invoice in invoices:
        store.create_invoice(invoice, [])


# The report


def test_the_report_covers_the_window_on_the_apps_clock(served: Served) -> None:
    store = served.api.store
    made = [
        finished("old", NOW - 200 * DAY, "insufficient_funds"),  # before the default window
        finished("in", NOW - 10 * DAY, "insufficient_funds"),
        finished(
            "won",
            NOW - 5 * DAY,
            "insufficient_funds",
            state=InvoiceState.RECOVERED,
            recovered_by="attempt:1",
        ),
        finished("late", NOW + DAY, "insufficient_funds"),  # after now: not yet
    ]
    for invoice in made:
        store.create_invoice(invoice, [])
    double_charged = InvoiceEvent(
        id=event_id("acme", "doubled", 1),
        tenant="acme",
        invoice_id="doubled",
        seq=1,
        type="invoice.double_charged",
        at=NOW - 9 * DAY,
        data={"attempt": 1},
    )
    store.create_invoice(finished("doubled", NOW - 9 * DAY, "insufficient_funds"), [double_charged])
    answer = served.http.get("/v1/dunning/report")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    report = answer.json()
    assert report["schema"].startswith("recoup.recovery-report/")
    assert report["until"] == NOW.isoformat()
    assert report["since"] == (NOW - 150 * DAY).isoformat()  # 30 days × (4 baseline + 1)
    assert report["options"]["now"] == NOW.isoformat()
    assert report["invoices"] == 3 and report["finished"] == 3  # not "old", not "late"
    assert report["overall"]["recovered"] == 1
    assert report["double_charges"] == 1
    assert report["overall"]["insufficient_data"] is True  # 4 < the default 30

    # The window and minimum volume are the caller's; the clock moves the default window.
    narrow = served.http.get(
        "/v1/dunning/report",
        params={"since": (NOW - 6 * DAY).isoformat(), "min_volume": 1},
    ).json()
    assert narrow["invoices"] == 1 and narrow["options"]["min_volume"] == 1
    assert narrow["overall"]["insufficient_data"] is False
    served.clock.set(NOW + 2 * DAY)
    later = served.http.get("/v1/dunning/report").json()
    assert later["invoices"] == 4 and later["options"]["now"] == (NOW + 2 * DAY).isoformat()


def test_the_report_as_one_html_page(served: Served) -> None:
    small_merchant_with_a_spike(served.api.store)
    answer = served.http.get("/v1/dunning/report", params={"format": "html"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    page = answer.text
    assert page.lstrip().lower().startswith("<!doctype html") and "<svg" in page
    assert "m-small" in page and "<script" not in page
    amounts = served.http.get("/v1/dunning/report").json()["amounts"]
    assert amounts and "<h2>Money</h2>" in page
    for currency, kinds in amounts.items():
        assert f"{kinds['lost'] / 100:.2f} {currency.upper()}" in page
    with Client(served.api.url, served.caller.token) as client:
        html = client.recovery_report_html(min_volume=5)
        assert "<svg" in html and html != page  # min_volume reached the report


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "2026-06-01T00:00:00"}, "since"),  # no offset
        ({"until": "0.5"}, "until"),  # not read as Unix time (found by fuzzing)
        ({"since": "1780000000"}, "since"),
        ({"since": "2026-06-10T00:00:00Z", "until": "2026-06-01T00:00:00Z"}, "until"),
        ({"min_volume": 0}, "min_volume"),
        ({"format": "pdf"}, "format"),
    ],
)
def test_bad_report_parameters_are_422s_naming_them(
    served: Served, params: dict[str, Any], field: str
) -> None:
    answer = served.http.get("/v1/dunning/report", params=params)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert field in answer.text


def test_a_since_ahead_of_now_without_until_is_an_empty_window(served: Served) -> None:
    # Found by schemathesis: `until` defaulted to now, before `since`, and answered 422.
    since = (NOW + 5 * DAY).isoformat()
    answer = served.http.get("/v1/dunning/report", params={"since": since})
    assert answer.status_code == 200, answer.text
    assert answer.json()["since"] == answer.json()["until"]


def test_the_report_needs_a_token_and_shows_only_the_callers_invoices(served: Served) -> None:
    small_merchant_with_a_spike(served.api.store)
    assert httpx.get(f"{served.api.url}/v1/dunning/report").status_code == 401
    other = served.api.http(served.api.tenant("other"))
    assert other.get("/v1/dunning/report").json()["invoices"] == 0
    assert other.get("/v1/dunning/review-queue").json()["review_queue"] == []


# Tags and the review queue


def test_a_tag_moves_a_flagged_merchant_out_of_the_queue_and_untag_brings_it_back(
    served: Served,
) -> None:
    small_merchant_with_a_spike(served.api.store)
    http = served.http
    queue = http.get("/v1/dunning/review-queue").json()
    assert [i["merchant_id"] for i in queue["review_queue"]] == ["m-small"]
    assert queue["review_queue"][0]["tag"] is None and queue["tags"] == []
    assert queue["now"] == NOW.isoformat().replace("+00:00", "Z")

    put = http.put(
        "/v1/dunning/merchants/m-small/tag", json={"tag": "seasonal", "note": "summer lull"}
    )
    assert put.status_code == 200, put.text
    assert put.json() == {
        "merchant_id": "m-small",
        "tag": "seasonal",
        "note": "summer lull",
        "tagged_at": "2026-07-01T00:00:00Z",  # the app's clock
    }
    queue = http.get("/v1/dunning/review-queue").json()
    assert queue["review_queue"] == []
    [suppressed] = queue["suppressed"]
    assert suppressed["merchant_id"] == "m-small" and suppressed["tag"]["tag"] == "seasonal"
    assert [t["merchant_id"] for t in queue["tags"]] == ["m-small"]
    # The report says the same.
    report = http.get("/v1/dunning/report").json()
    assert report["review_queue"] == [] and len(report["suppressed"]) == 1

    assert http.delete("/v1/dunning/merchants/m-small/tag").status_code == 204
    assert http.delete("/v1/dunning/merchants/m-small/tag").status_code == 204  # harmless
    queue = http.get("/v1/dunning/review-queue").json()
    assert [i["merchant_id"] for i in queue["review_queue"]] == ["m-small"]
    assert queue["tags"] == []


@pytest.mark.parametrize(
    ("merchant_id", "body", "field"),
    [
        ("m-1", {"tag": "vip"}, "tag"),
        ("m-1", {"tag": "new", "note": "n" * 1001}, "note"),
        ("m-1", {"tag": "new", "colour": "red"}, "colour"),
        ("m" * 101, {"tag": "new"}, "merchant_id"),
    ],
)
def test_a_bad_tag_is_a_422_naming_the_field_and_stores_nothing(
    served: Served, merchant_id: str, body: dict[str, Any], field: str
) -> None:
    answer = served.http.put(f"/v1/dunning/merchants/{merchant_id}/tag", json=body)
    assert answer.status_code == 422, answer.text
    assert field in answer.text
    assert served.api.store.merchant_tags("acme") == []


def test_the_tags_the_api_takes_are_the_analytics_tag_kinds() -> None:
    assert get_args(TagIn.model_fields["tag"].annotation) == TAG_KINDS


def test_tags_belong_to_the_tenant_that_made_them(served: Served) -> None:
    served.http.put("/v1/dunning/merchants/m-1/tag", json={"tag": "new"})
    other = served.api.http(served.api.tenant("other"))
    assert other.get("/v1/dunning/review-queue").json()["tags"] == []
    assert other.delete("/v1/dunning/merchants/m-1/tag").status_code == 204
    assert [t.merchant_id for t in served.api.store.merchant_tags("acme")] == ["m-1"]


# Experiment settings


def test_settings_carry_the_experiment_and_refuse_a_half_or_a_same_named_one(
    served: Served,
) -> None:
    http = served.http
    body = {
        "charge_url": "http://127.0.0.1:9/c",
        "experiment_name": "evening-test",
        "experiment_policy": EVENING,
        "experiment_share": 0.3,
    }
    put = http.put("/v1/dunning/settings", json=body)
    assert put.status_code == 200, put.text
    got = http.get("/v1/dunning/settings").json()
    assert {k: got[k] for k in body} == body
    for bad, field in [
        ({**body, "experiment_share": None}, "experiment_share"),
        ({**body, "experiment_share": 1.0}, "experiment_share"),
        ({**body, "experiment_share": "0.5"}, "experiment_share"),
        (
            {**body, "experiment_policy": EVENING.replace('"evening"', '"business-days"')},
            "experiment_policy.name",
        ),
        ({**body, "policy": EVENING}, "experiment_policy.name"),
        ({**body, "experiment_policy": "gaps = 2"}, "experiment_policy.gaps"),
    ]:
        answer = http.put("/v1/dunning/settings", json=bad)
        assert answer.status_code == 422, (bad, answer.text)
        assert field in answer.text, (field, answer.text)
    assert http.get("/v1/dunning/settings").json() == got  # nothing stored
    # A policy without a name of its own is arm b's by default.
    unnamed = EVENING.replace('name = "evening"', "")
    put = http.put("/v1/dunning/settings", json={**body, "experiment_policy": unnamed})
    assert put.status_code == 200, put.text
    # The report compares the tenant's two policies by name.
    report = http.get("/v1/dunning/report").json()
    assert report["options"]["experiment"] == ["business-days", ARM_B_NAME]
    # PUT replaces the whole: without the experiment fields, there is no experiment.
    cleared = http.put("/v1/dunning/settings", json={"charge_url": "http://127.0.0.1:9/c"})
    assert cleared.json()["experiment_name"] is None
    assert cleared.json()["experiment_share"] is None


# The Python client


def test_the_python_client_reads_the_report_and_manages_tags(served: Served) -> None:
    small_merchant_with_a_spike(served.api.store)
    with Client(served.api.url, served.caller.token) as client:
        report = client.recovery_report(min_volume=5)
        assert report["options"]["min_volume"] == 5 and report["invoices"] == 96
        assert report["invoices"] == len(
            served.api.store.report_invoices("acme", since=NOW - 150 * DAY, until=NOW)
        )
        narrow = client.recovery_report(since=NOW - 30 * DAY, until=NOW - 20 * DAY)
        assert 0 < narrow["invoices"] < 16
        tag = client.tag_merchant("m-small", "new", note="onboarded in May")
        assert (tag.tag, tag.note, tag.tagged_at) == ("new", "onboarded in May", NOW)
        queue = client.review_queue()
        assert queue.review_queue == [] and [s.merchant_id for s in queue.suppressed] == ["m-small"]
        client.untag_merchant("m-small")
        assert [i.merchant_id for i in client.review_queue().review_queue] == ["m-small"]
        with pytest.raises(Unprocessable):
            client.tag_merchant("m-small", "vip")
        settings = client.configure_dunning(
            charge_url="http://127.0.0.1:9/c",
            experiment_name="x",
            experiment_policy=EVENING,
            experiment_share=0.5,
        )
        assert (settings.experiment_name, settings.experiment_share) == ("x", 0.5)
