"""The gateway's HTTP server, in-process (no sockets) through `InProcessTransport`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from recoup.payments import Fault, FaultKind, Scenario, SimulatedGateway
from recoup.payments.wire import charge_request_to_json, fault_to_json
from tests.payments.conftest import START, RecordedSleep, in_process_client, make_request

PROBLEM = "application/problem+json"


@pytest.fixture
def http(gateway: SimulatedGateway) -> Iterator[httpx.Client]:
    with in_process_client(gateway) as client:
        yield client


def body(**fields: Any) -> dict[str, Any]:
    data = charge_request_to_json(make_request(**fields))
    return {k: v for k, v in data.items() if v is not None}


def test_a_charge_answers_the_charge_and_a_repeat_the_same(
    http: httpx.Client, gateway: SimulatedGateway
) -> None:
    first = http.post("/charges", json=body())
    assert first.status_code == 200
    assert first.json()["status"] == "succeeded"
    assert first.json()["created_at"] == "2026-12-08T09:00:00Z"
    again = http.post("/charges", json=body())
    assert again.json() == first.json()
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}


def test_the_key_may_come_in_the_header_even_quoted(
    http: httpx.Client, gateway: SimulatedGateway
) -> None:
    data = body()
    del data["idempotency_key"]
    answer = http.post("/charges", json=data, headers={"Idempotency-Key": '"charge:inv_1:1"'})
    assert answer.status_code == 200
    assert gateway.find_charge("charge:inv_1:1") is not None


def test_a_charge_without_a_key_is_a_400(http: httpx.Client) -> None:
    data = body()
    del data["idempotency_key"]
    answer = http.post("/charges", json=data)
    assert answer.status_code == 400
    assert answer.headers["content-type"] == PROBLEM
    assert answer.json()["type"] == "urn:recoup:gateway:missing-idempotency-key"


def test_a_decline_is_a_200_carrying_its_codes(http: httpx.Client) -> None:
    http.post(
        "/cards", json={"fingerprint": "card_lost", "scenario": {"decline_code": "lost_card"}}
    )
    answer = http.post("/charges", json=body(card="card_lost"))
    assert answer.status_code == 200
    assert (answer.json()["status"], answer.json()["decline_code"]) == (
        "failed_terminal",
        "lost_card",
    )


def test_a_reused_key_with_another_amount_is_a_422_naming_the_key(http: httpx.Client) -> None:
    http.post("/charges", json=body())
    answer = http.post("/charges", json=body(amount=1))
    assert answer.status_code == 422
    problem = answer.json()
    assert problem["type"] == "urn:recoup:gateway:idempotency-key-mismatch"
    assert "charge:inv_1:1" in problem["detail"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"amount": "12"}, "amount"),
        ({"at": "2026-12-08T09:00:00"}, "at"),
        ({"currency": "us"}, "currency"),
    ],
)
def test_bad_input_is_a_422_naming_the_field(
    http: httpx.Client, payload: dict[str, Any], field: str
) -> None:
    answer = http.post("/charges", json={**body(), **payload})
    assert answer.status_code == 422
    assert answer.json()["field"] == field
    assert answer.headers["content-type"] == PROBLEM


def test_a_body_that_is_not_json_is_a_422(http: httpx.Client) -> None:
    answer = http.post("/charges", content=b"{nope", headers={"content-type": "application/json"})
    assert answer.status_code == 422
    assert answer.json()["field"] == "body"


def test_lookups_answer_the_charge_or_404(http: httpx.Client) -> None:
    http.post("/charges", json=body(key="charge:inv/1:1"))  # a key with a slash, and colons
    found = http.get("/charges/charge:inv%2F1:1")
    assert found.status_code == 200 and found.json()["idempotency_key"] == "charge:inv/1:1"
    missing = http.get("/charges/charge:inv_9:1")
    assert missing.status_code == 404
    assert missing.json()["type"] == "urn:recoup:gateway:not-found"


def test_timeouts_are_504_and_the_ambiguous_charge_is_made(
    http: httpx.Client, gateway: SimulatedGateway, sleep: RecordedSleep
) -> None:
    http.post("/faults", json={"kind": "timeout_before", "times": 1, "delay_seconds": 5})
    before = http.post("/charges", json=body())
    assert before.status_code == 504
    assert sleep.delays == [5]
    assert http.get("/charges/charge:inv_1:1").status_code == 404
    http.post("/faults", json={"kind": "timeout_after", "times": 1})
    after = http.post("/charges", json=body())
    assert after.status_code == 504
    assert after.json()["type"] == "urn:recoup:gateway:timeout"
    assert http.get("/charges/charge:inv_1:1").json()["status"] == "succeeded"
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}


def test_unavailability_is_503(http: httpx.Client) -> None:
    outage = Fault.outage(START, START + timedelta(hours=1))
    assert http.post("/faults", json=fault_to_json(outage)).status_code == 201
    answer = http.post("/charges", json=body())
    assert answer.status_code == 503
    assert answer.json()["type"] == "urn:recoup:gateway:unavailable"
    assert http.get("/charges/charge:inv_1:1").status_code == 503


def test_cards_can_be_added_and_updated(http: httpx.Client, gateway: SimulatedGateway) -> None:
    added = http.post(
        "/cards",
        json={
            "fingerprint": "card_exp",
            "scenario": {"decline_code": "expired_card", "clears_on_update": True},
        },
    )
    assert added.status_code == 201
    assert gateway.charge(make_request("k1", card="card_exp")).decline_code == "expired_card"
    updated = http.post("/cards/card_exp/update")
    assert updated.json() == {"fingerprint": "card_exp", "updated_at": "2026-12-08T09:00:00Z"}
    assert (
        http.post("/charges", json=body(key="k2", card="card_exp")).json()["status"] == "succeeded"
    )
    assert http.post("/cards/card_nope/update", json={}).status_code == 404
    assert gateway.charge(make_request("k3", card="card_plain")).status.value == "succeeded"
    assert http.post("/cards", json={"fingerprint": "card_plain"}).status_code == 201


def test_a_bad_scenario_names_its_field(http: httpx.Client) -> None:
    answer = http.post(
        "/cards", json={"fingerprint": "c", "scenario": {"decline_code": "x", "paydays": [40]}}
    )
    assert answer.status_code == 422
    assert answer.json()["field"] == "scenario.paydays"


def test_faults_are_listed_removed_and_cleared(http: httpx.Client) -> None:
    created = http.post("/faults", json={"kind": "duplicate", "times": 2})
    assert created.status_code == 201
    fault_id = created.json()["id"]
    http.post("/faults", json={"kind": "slow", "delay_seconds": 1.5})
    listed = http.get("/faults").json()["faults"]
    first = listed[0]
    assert (first["id"], first["kind"], first["remaining"]) == (fault_id, "duplicate", 2)
    assert http.delete(f"/faults/{fault_id}").status_code == 204
    assert http.delete(f"/faults/{fault_id}").status_code == 404
    assert http.delete("/faults").status_code == 204
    assert http.get("/faults").json() == {"faults": []}


def test_stats_and_invoice_charges_report_the_money(http: httpx.Client) -> None:
    http.post("/faults", json={"kind": "duplicate", "times": 1})
    http.post("/charges", json=body())
    http.post("/charges", json=body(key="charge:inv_1:2"))  # forgot to reconcile
    stats = http.get("/stats").json()
    assert stats["charges_per_key"] == {"charge:inv_1:1": 1, "charge:inv_1:2": 1}
    assert stats["double_charged_invoices"] == ["inv_1"]
    assert (stats["calls"], stats["deliveries"], stats["replays"]) == (2, 3, 1)
    assert stats["faults_fired"] == {"duplicate": 1}
    invoice = http.get("/invoices/inv_1/charges").json()
    assert invoice["total_charged"] == 2 * 1999 and len(invoice["charges"]) == 2


def test_unknown_routes_and_methods_are_problems(http: httpx.Client) -> None:
    assert http.get("/nowhere").json()["status"] == 404
    wrong = http.put("/charges")
    assert wrong.status_code == 405
    assert wrong.headers["content-type"] == PROBLEM


def test_an_unknown_fault_kind_is_a_422(http: httpx.Client) -> None:
    answer = http.post("/faults", json={"kind": "meteor"})
    assert answer.status_code == 422 and answer.json()["field"] == "kind"


def test_the_scenarios_status_travels_with_the_card(gateway: SimulatedGateway) -> None:
    with in_process_client(gateway) as http:
        scenario = {"decline_code": "do_not_honor", "advice_code": "do_not_try_again"}
        http.post("/cards", json={"fingerprint": "card_dnh", "scenario": scenario})
    charge = gateway.charge(make_request(card="card_dnh"))
    assert charge.status.value == "failed_terminal"
    assert Scenario.hard("do_not_honor", advice_code="do_not_try_again").status is charge.status
    assert FaultKind("slow") is FaultKind.SLOW
