"""The explanation of any decision can be read back from the API, on each backend: an adaptive
tenant's invoices show each attempt's timing (arm, slots, propensity, explanation, figures) in
GET /v1/dunning/invoices/{invoice_id}, as stored with the attempt; a static tenant's show null."""

from __future__ import annotations

from typing import Any

from recoup.dunning.policy import preset_text
from tests.api.conftest import Api
from tests.api.test_dunning_api import FAILURE

QUICK = preset_text("adaptive").replace("min_attempts = 100", "min_attempts = 10")


def test_every_decision_and_its_explanation_read_back_from_the_api(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    assert http.put("/v1/dunning/settings", json={"policy": QUICK}).status_code == 200
    for n in range(14):  # a log: first attempts answered, the first half succeeding
        body = {**FAILURE, "invoice_id": f"log-{n}", "customer_id": f"cus-{n}", "card": None}
        assert http.post("/v1/dunning/failures", json=body).status_code == 201
        outcome = (
            {"outcome": "succeeded"}
            if n % 2
            else {"outcome": "failed", "decline_code": "insufficient_funds"}
        )
        answer = http.post(f"/v1/dunning/invoices/log-{n}/attempts/1/outcome", json=outcome)
        assert answer.status_code == 200, answer.text
    seen: list[dict[str, Any]] = []
    for n in range(6):
        body = {**FAILURE, "invoice_id": f"new-{n}", "customer_id": f"new-cus-{n}", "card": None}
        assert http.post("/v1/dunning/failures", json=body).status_code == 201
    for invoice_id in [f"log-{n}" for n in range(14)] + [f"new-{n}" for n in range(6)]:
        timeline = http.get(f"/v1/dunning/invoices/{invoice_id}")
        assert timeline.status_code == 200
        stored = api.store.get_invoice(caller.tenant, invoice_id)
        assert stored is not None
        attempts = timeline.json()["attempts"]
        assert len(attempts) == len(stored.attempts)
        for shown, attempt in zip(attempts, stored.attempts, strict=True):
            timing = attempt.timing
            assert timing is not None
            assert shown["timing"] == {**timing.as_dict(), "moved": timing.moved}
            seen.append(shown["timing"])
    explanations = [t["explanation"] for t in seen]
    assert any("cold start" in e for e in explanations)  # the first invoices' decisions
    learned = [t for t in seen if t["arm"] == "adaptive" and "cold start" not in t["explanation"]]
    assert learned, explanations
    for t in learned:
        assert t["explanation"].startswith(t["slot"])
        assert "for the static slot" in t["explanation"] and 0 < t["propensity"] <= 1
        assert 0 <= t["figures"]["estimate"] <= 1


def test_a_static_tenants_attempts_show_no_timing(api: Api) -> None:
    http = api.http(api.tenant())
    assert http.post("/v1/dunning/failures", json=FAILURE).status_code == 201
    attempts = http.get("/v1/dunning/invoices/inv_1").json()["attempts"]
    assert attempts and all(a["timing"] is None for a in attempts)
