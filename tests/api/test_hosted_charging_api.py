"""Stripe-native dunning over real HTTP, on both backends: `charge_with` and the write-only
`stripe_api_key` of PUT /v1/dunning/settings (never shown again, never echoed in an error),
POST /v1/dunning/invoices/{id}/cancel, and the Python client's calls for both."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest

from recoup.client import Client
from recoup.sealed import SecretBox
from tests.api.conftest import Api, Caller
from tests.api.test_dunning_api import FAILURE

KEY = "sk_test_" + "Ap1K3y" * 6
SETTINGS: dict[str, Any] = {"charge_url": "http://127.0.0.1:9/charge"}


def put(http: httpx.Client, **fields: Any) -> httpx.Response:
    return http.put("/v1/dunning/settings", json={**SETTINGS, **fields})


def stored_key(api: Api, caller: Caller) -> str | None:
    found = api.store.hosted.get_hosted_charging(caller.tenant)
    if found is None:
        return None
    assert found.api_key.startswith("sealed:v1:") and KEY not in found.api_key
    return SecretBox([os.environ["RECOUP_SECRET_KEY"]]).open(found.api_key)


# Settings


def test_a_stripe_key_is_stored_sealed_and_never_shown(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)

    answer = put(http, charge_with="stripe", stripe_api_key=KEY)
    shown = http.get("/v1/dunning/settings")

    assert answer.status_code == 200, answer.text
    for response in (answer, shown):
        body = response.json()
        assert (body["charge_with"], body["stripe_api_key_set"]) == ("stripe", True)
        assert KEY not in response.text and KEY[-8:] not in response.text
    assert stored_key(api, caller) == KEY
    # Left out, the key and the choice are kept; a failure is then charged at Stripe.
    assert put(http).json()["charge_with"] == "stripe"
    assert stored_key(api, caller) == KEY
    invoice = http.post("/v1/dunning/failures", json={**FAILURE, "charge_url": None})
    assert invoice.status_code == 201, invoice.text
    got = http.get(f"/v1/dunning/invoices/{FAILURE['invoice_id']}")
    assert '"stripe:"' in got.text and KEY not in got.text


@pytest.mark.parametrize(
    "bad",
    ["pk_test_" + "Ap1K3y" * 6, "sk_test_" + "Ap1K3y" * 6 + " ", "sk_prod_" + "Ap1K3y" * 6, ""],
)
def test_a_malformed_key_is_422_naming_it_not_echoed_and_nothing_stored(api: Api, bad: str) -> None:
    caller = api.tenant()
    http = api.http(caller)

    answer = put(http, charge_with="stripe", stripe_api_key=bad)

    assert answer.status_code == 422, answer.text
    assert "stripe_api_key" in answer.text
    assert "Ap1K3y" not in answer.text
    assert stored_key(api, caller) is None
    assert http.get("/v1/dunning/settings").json()["charge_with"] == "url"
    assert api.store.get_settings(caller.tenant) is None


def test_a_key_without_charging_with_stripe_is_422(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)

    for fields in ({"stripe_api_key": KEY}, {"charge_with": "url", "stripe_api_key": KEY}):
        answer = put(http, **fields)
        assert answer.status_code == 422, answer.text
        assert "stripe_api_key" in answer.text and KEY not in answer.text
    assert stored_key(api, caller) is None


def test_charging_with_stripe_without_a_key_is_422(api: Api) -> None:
    caller = api.tenant()

    answer = put(api.http(caller), charge_with="stripe")

    assert answer.status_code == 422 and "stripe_api_key" in answer.text
    assert stored_key(api, caller) is None


def test_charge_with_url_removes_the_key(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    assert put(http, charge_with="stripe", stripe_api_key=KEY).status_code == 200

    answer = put(http, charge_with="url")

    assert (answer.json()["charge_with"], answer.json()["stripe_api_key_set"]) == ("url", False)
    assert stored_key(api, caller) is None


# Cancel


def opened(http: httpx.Client) -> dict[str, Any]:
    answer = http.post("/v1/dunning/failures", json=FAILURE)
    assert answer.status_code == 201, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_cancel_stops_dunning_its_jobs_and_a_repeat_replays(api: Api) -> None:
    http = api.http(api.tenant())
    invoice = opened(http)
    path = f"/v1/dunning/invoices/{invoice['invoice_id']}/cancel"
    headers = {"Idempotency-Key": "cancel-1"}

    answer = http.post(path, json={"reason": "refunded"}, headers=headers)
    again = http.post(path, json={"reason": "refunded"}, headers=headers)

    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "cancelled"
    assert (again.status_code, again.json()) == (200, answer.json())
    jobs = http.get("/v1/jobs", params={"group": f"dunning:{invoice['invoice_id']}"}).json()
    assert {j["state"] for j in jobs["jobs"]} == {"cancelled"}
    timeline = http.get(f"/v1/dunning/invoices/{invoice['invoice_id']}").json()
    types = [e["type"] for e in timeline["events"]]
    assert types.count("invoice.dunning_cancelled") == 1
    # The same key with another body is refused, not replayed.
    other = http.post(path, json={"reason": "other"}, headers=headers)
    assert other.status_code in (409, 422), other.text


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": "x" * 1001}, {"reason": None}])
def test_cancel_needs_a_reason(api: Api, body: dict[str, Any]) -> None:
    http = api.http(api.tenant())
    invoice = opened(http)

    answer = http.post(f"/v1/dunning/invoices/{invoice['invoice_id']}/cancel", json=body)

    assert answer.status_code == 422 and "reason" in answer.text
    assert http.get(f"/v1/dunning/invoices/{invoice['invoice_id']}").json()["state"] == "retrying"


def test_cancel_of_an_unknown_or_anothers_invoice_is_404(api: Api) -> None:
    mine, theirs = api.http(api.tenant()), api.http(api.tenant())
    invoice = opened(theirs)

    for path in ("in_nope", invoice["invoice_id"]):
        answer = mine.post(f"/v1/dunning/invoices/{path}/cancel", json={"reason": "r"})
        assert answer.status_code == 404, answer.text
    assert theirs.get(f"/v1/dunning/invoices/{invoice['invoice_id']}").json()["state"] == "retrying"


# The Python client


def test_the_client_configures_stripe_charging_and_cancels(api: Api) -> None:
    caller = api.tenant()
    with Client(api.url, caller.token) as recoup:
        configured = recoup.configure_dunning(
            charge_url=SETTINGS["charge_url"], charge_with="stripe", stripe_api_key=KEY
        )
        assert (configured.charge_with, configured.stripe_api_key_set) == ("stripe", True)
        assert recoup.dunning_settings().stripe_api_key_set is True
        assert stored_key(api, caller) == KEY

        invoice = recoup.report_failure(
            invoice_id="in_c",
            customer_id="cus_1",
            amount=1999,
            currency="usd",
            failed_at="2026-06-23T15:00:00Z",
            timezone="America/Chicago",
        )
        assert invoice.state == "retrying"
        assert recoup.get_invoice("in_c").charge_url == "stripe:"
        cancelled = recoup.cancel_invoice("in_c", reason="subscription_cancelled")
        assert cancelled.state == "cancelled"
        assert recoup.cancel_invoice("in_c", reason="again").state == "cancelled"

        removed = recoup.configure_dunning(charge_url=SETTINGS["charge_url"], charge_with="url")
        assert (removed.charge_with, removed.stripe_api_key_set) == ("url", False)
    assert stored_key(api, caller) is None
