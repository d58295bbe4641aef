"""/v1/dunning over real HTTP, on both backends: the failure contract (201, replay 200,
conflict 409, errors naming fields), timelines, listings, payments, settings; and /v1/clock,
which exists only on a server on a virtual clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from recoup.api.app import create_app
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.time_travel import TestClock
from recoup.payments import SimulatedGateway
from recoup.recovery.runtime import dunning_runtime
from recoup.timekeeping.clock import VirtualClock
from tests.api.conftest import Api, api_settings
from tests.recovery.conftest import ChargeSide
from tests.support import ServerThread

FAILURE: dict[str, Any] = {
    "invoice_id": "inv_1",
    "customer_id": "cus_1",
    "amount": 1999,
    "currency": "usd",
    "failed_at": "2026-06-23T15:00:00Z",
    "timezone": "America/Chicago",
    "country": "US",
    "decline_code": "insufficient_funds",
    "card": {"fingerprint": "fp_1", "network": "visa"},
    "gateway": "stripe",
    "merchant_id": "m_1",
    "charge_url": "http://127.0.0.1:9/charge",
}


def test_a_failure_is_planned_into_one_job_per_attempt_in_one_group(api: Api) -> None:
    http = api.http(api.tenant())
    answer = http.post("/v1/dunning/failures", json=FAILURE)
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert set(body) >= {"invoice_id", "state", "decision", "reason", "attempts"}
    assert body["state"] == "retrying" and body["decision"] == "retry"
    assert [a["attempt"] for a in body["attempts"]] == [1, 2, 3, 4]
    assert all(set(a) == {"attempt", "at", "job_id", "state"} for a in body["attempts"])
    jobs = http.get("/v1/jobs", params={"group": "dunning:inv_1"}).json()["jobs"]
    assert sorted(j["name"] for j in jobs) == [f"dunning-retry-inv_1-{n}" for n in (1, 2, 3, 4)]
    assert {j["id"] for j in jobs} == {a["job_id"] for a in body["attempts"]}


def test_the_same_failure_again_answers_the_same_invoice_and_a_new_one_conflicts(
    api: Api,
) -> None:
    http = api.http(api.tenant())
    first = http.post("/v1/dunning/failures", json=FAILURE).json()
    again = http.post("/v1/dunning/failures", json=FAILURE)
    assert again.status_code == 200 and again.json() == first
    other = http.post("/v1/dunning/failures", json={**FAILURE, "failed_at": "2026-06-24T15:00:00Z"})
    assert other.status_code == 409
    assert "inv_1" in other.json()["detail"]
    assert len(http.get("/v1/jobs", params={"group": "dunning:inv_1"}).json()["jobs"]) == 4


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"amount": 19.99}, "amount"),
        ({"amount": "1999"}, "amount"),
        ({"amount": 0}, "amount"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"failed_at": "2026-06-23T15:00:00"}, "failed_at"),
        ({"currency": "dollars"}, "currency"),
        ({"charge_url": None}, "charge_url"),
        ({"charge_url": "ftp://x/y"}, "charge_url"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_failures_are_422s_naming_the_field_and_store_nothing(
    api: Api, change: dict[str, Any], field: str
) -> None:
    http = api.http(api.tenant())
    answer = http.post("/v1/dunning/failures", json={**FAILURE, **change})
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert field in answer.text
    assert http.get("/v1/dunning/invoices/inv_1").status_code == 404


def test_timeline_paid_out_of_band_and_listing(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    http.post("/v1/dunning/failures", json=FAILURE)
    http.post("/v1/dunning/failures", json={**FAILURE, "invoice_id": "inv_2", "customer_id": "c2"})
    paid = http.post("/v1/dunning/invoices/inv_1/paid")
    assert paid.status_code == 200 and paid.json()["state"] == "recovered"
    assert {a["state"] for a in paid.json()["attempts"]} == {"cancelled"}
    timeline = http.get("/v1/dunning/invoices/inv_1").json()
    assert [e["type"] for e in timeline["events"]] == [
        "invoice.retry_scheduled",
        "customer.access_changed",
        "invoice.recovered",
        "customer.access_changed",
    ]
    assert timeline["attempts"][0]["runs_url"].endswith("/runs")
    assert timeline["recovered_by"] == "paid_out_of_band"
    recovered = http.get("/v1/dunning/invoices", params={"state": "recovered"}).json()
    assert [i["invoice_id"] for i in recovered["invoices"]] == ["inv_1"]
    by_customer = http.get("/v1/dunning/invoices", params={"customer_id": "c2"}).json()
    assert [i["invoice_id"] for i in by_customer["invoices"]] == ["inv_2"]
    first = http.get("/v1/dunning/invoices", params={"limit": 1}).json()
    second = http.get(
        "/v1/dunning/invoices", params={"limit": 1, "cursor": first["next_cursor"]}
    ).json()
    assert [i["invoice_id"] for i in first["invoices"] + second["invoices"]] == ["inv_1", "inv_2"]
    # Another tenant sees none of it.
    stranger = api.http(api.tenant())
    assert stranger.get("/v1/dunning/invoices/inv_1").status_code == 404
    assert stranger.post("/v1/dunning/invoices/inv_1/paid").status_code == 404


def test_outcomes_reported_later_and_their_errors(api: Api) -> None:
    http = api.http(api.tenant())
    http.post("/v1/dunning/failures", json=FAILURE)
    url = "/v1/dunning/invoices/inv_1/attempts/1/outcome"
    ok = http.post(url, json={"outcome": "failed", "decline_code": "stolen_card"})
    assert ok.status_code == 200 and ok.json()["state"] == "exhausted"
    assert http.post(url, json={"outcome": "maybe"}).status_code == 422
    assert (
        http.post(
            "/v1/dunning/invoices/inv_1/attempts/9/outcome", json={"outcome": "succeeded"}
        ).status_code
        == 404
    )


def test_settings_round_trip_and_a_bad_policy_names_its_field(api: Api) -> None:
    http = api.http(api.tenant())
    put = http.put(
        "/v1/dunning/settings",
        json={"charge_url": "http://127.0.0.1:9/c", "event_url": "http://127.0.0.1:9/e"},
    )
    assert put.status_code == 200 and put.json()["charge_url"] == "http://127.0.0.1:9/c"
    assert http.get("/v1/dunning/settings").json()["event_url"] == "http://127.0.0.1:9/e"
    bad = http.put("/v1/dunning/settings", json={"policy": "gaps = 'soon'"})
    assert bad.status_code == 422 and "gaps" in bad.text
    # The default charge URL serves failures that give none.
    without = {k: v for k, v in FAILURE.items() if k != "charge_url"}
    assert http.post("/v1/dunning/failures", json=without).status_code == 201


def test_the_clock_route_is_a_404_on_a_normal_server(api: Api) -> None:
    http = api.http(api.tenant())
    assert http.get("/v1/clock").status_code == 404
    assert http.post("/v1/clock", json={"advance_seconds": 60}).status_code == 404


@pytest.fixture
def virtual_server(store: Any, tables: Any) -> Iterator[tuple[Api, ChargeSide]]:
    clock = VirtualClock(datetime(2026, 6, 23, 15, 0, tzinfo=UTC))
    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    secret = scheduler.default_tenant().signing_secret
    side = ChargeSide(gateway=SimulatedGateway(clock, sleep=lambda s: None), secret=lambda: secret)
    with ServerThread(side.app()) as charge_server:  # type: ignore[arg-type]
        dunning, handlers = dunning_runtime(scheduler, store)
        test_clock = TestClock(
            clock, scheduler.worker(handlers=handlers), store, before_step=dunning.resync
        )
        app = create_app(
            store,
            clock=clock,
            settings=api_settings(),
            scheduler=scheduler,
            dunning=dunning,
            test_clock=test_clock,
        )
        with ServerThread(app) as server:
            api = Api(server.url, store, tables, app)
            side.cards["inv_1"] = "fp_1"
            dunning.configure(
                "default",
                policy_toml=None,
                event_url=f"{charge_server.url}/events",
                charge_url=f"{charge_server.url}/charge",
            )
            yield api, side
            for client in api.clients:
                client.close()


def test_a_test_clock_advanced_sixteen_days_runs_the_whole_plan(
    virtual_server: tuple[Api, ChargeSide],
) -> None:
    api, side = virtual_server
    from recoup.payments import Scenario

    side.gateway.add_card("fp_1", Scenario.soft())  # never clears: every attempt fails
    from recoup.tenancy import issue_token

    token = issue_token(api.tables, "default", now=datetime.now(UTC)).secret
    http = httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    with http:
        body = {k: v for k, v in FAILURE.items() if k != "charge_url"}
        assert http.post("/v1/dunning/failures", json=body).status_code == 201
        assert http.get("/v1/clock").json()["now"].startswith("2026-06-23T15:00:00")
        moved = http.post("/v1/clock", json={"advance_seconds": 16 * 86400})
        assert moved.status_code == 200, moved.text
        assert moved.json()["now"].startswith("2026-07-09T15:00:00")
        timeline = http.get("/v1/dunning/invoices/inv_1").json()
        assert timeline["state"] == "exhausted"
        asked = [r["attempt"] for r in side.requests]
        assert asked == [1, 2, 3, 4]
        starts = [a["runs"][0]["started_at"] for a in timeline["attempts"]]
        assert starts == sorted(starts)
        types = [e["type"] for e in side.events]
        assert types.count("invoice.retry_failed") == 4
        assert types.count("invoice.exhausted") == 1
        assert http.post("/v1/clock", json={"to": "2026-07-01T00:00:00Z"}).status_code == 422
        assert http.post("/v1/clock", json={}).status_code == 422


def test_the_python_client_drives_dunning_and_the_test_clock(
    virtual_server: tuple[Api, ChargeSide],
) -> None:
    from recoup.client import Client, NotFoundError
    from recoup.payments import Scenario
    from recoup.tenancy import issue_token

    api, side = virtual_server
    side.gateway.add_card("fp_1", Scenario.soft(clears_after=timedelta(days=4)))
    token = issue_token(api.tables, "default", now=datetime.now(UTC)).secret
    with Client(api.url, token) as client:
        opened = client.report_failure(
            invoice_id="inv_1",
            customer_id="cus_1",
            amount=1999,
            currency="usd",
            failed_at=datetime(2026, 6, 23, 15, 0, tzinfo=UTC),
            timezone="America/Chicago",
            country="US",
            decline_code="insufficient_funds",
            card_fingerprint="fp_1",
            card_network="visa",
        )
        assert opened.state == "retrying" and len(opened.attempts) == 4
        before = client.clock().now
        moved = client.advance_clock(seconds=10 * 86400)
        assert moved.now == before + timedelta(days=10) and moved.ran > 0
        timeline = client.get_invoice("inv_1")
        assert timeline.state == "recovered"
        assert [e.type for e in timeline.events][-2:] == [
            "invoice.recovered",
            "customer.access_changed",
        ]
        assert timeline.events[-1].data["access"] == "active"
        assert client.get_customer("cus_1").access == "active"
        page = client.list_invoices(state="recovered")
        assert [i.invoice_id for i in page.invoices] == ["inv_1"]
        with pytest.raises(NotFoundError):
            client.mark_paid("inv_404")


def test_metrics_count_each_tenants_invoices_amounts_attempts_and_double_charges(
    api: Api,
) -> None:
    tenant = api.tenant()
    http = api.http(tenant)
    http.post("/v1/dunning/failures", json=FAILURE)
    http.post("/v1/dunning/failures", json={**FAILURE, "invoice_id": "inv_2", "amount": 500})
    http.post("/v1/dunning/invoices/inv_2/paid")
    text = api.http().get("/metrics").text
    who = http.get("/v1/dunning/invoices/inv_1").json()
    assert who["state"] == "retrying"
    invoice_lines = [line for line in text.splitlines() if line.startswith("recoup_dunning_inv")]
    [name] = {line.split('tenant="')[1].split('"')[0] for line in invoice_lines}
    assert f'recoup_dunning_invoices{{state="retrying",tenant="{name}"}} 1.0' in text
    assert f'recoup_dunning_invoices{{state="recovered",tenant="{name}"}} 1.0' in text
    at_risk = f'recoup_dunning_amount_minor{{currency="usd",kind="at_risk",tenant="{name}"}}'
    assert f"{at_risk} 1999.0" in text
    recovered = f'recoup_dunning_amount_minor{{currency="usd",kind="recovered",tenant="{name}"}}'
    assert f"{recovered} 500.0" in text
    # inv_1's four attempts are scheduled; inv_2's were cancelled when it was paid.
    assert f'recoup_dunning_attempts{{state="scheduled",tenant="{name}"}} 4.0' in text
    assert f'recoup_dunning_double_charges_total{{tenant="{name}"}} 0.0' in text
