"""Customers over real HTTP, on both backends: the contact details a failure carries are
stored on its customer (checked, written one way), bad ones are 422s naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.api.conftest import Api
from tests.api.test_dunning_api import FAILURE

CONTACT = {"customer_email": "Ada@Example.COM", "customer_name": "Ada Lovelace", "locale": "de-DE"}


def test_a_failure_stores_who_to_write_to_on_its_customer(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    just_now = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    answer = http.post("/v1/dunning/failures", json={**FAILURE, **CONTACT, "failed_at": just_now})
    assert answer.status_code == 201, answer.text
    customer = api.store.customers.get_customer(caller.tenant, "cus_1")
    assert customer is not None
    assert (customer.email, customer.name, customer.locale) == (
        "Ada@example.com",
        "Ada Lovelace",
        "de_DE",
    )
    # A failure an hour ago: within the default grace period.
    assert customer.access == "grace" and not customer.is_suppressed


def test_a_later_failure_changes_only_what_it_carries(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    http.post("/v1/dunning/failures", json={**FAILURE, **CONTACT})
    second = {**FAILURE, "invoice_id": "inv_2", "locale": "fr_FR"}
    assert http.post("/v1/dunning/failures", json=second).status_code == 201
    customer = api.store.customers.get_customer(caller.tenant, "cus_1")
    assert customer is not None
    assert (customer.email, customer.locale) == ("Ada@example.com", "fr_FR")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"customer_email": "ada"}, "customer_email"),
        ({"customer_email": "Ada <ada@example.com>"}, "customer_email"),
        ({"customer_email": "ada@localhost"}, "customer_email"),
        ({"customer_name": "Ada\r\nBcc: x@example.com"}, "customer_name"),
        ({"locale": "english"}, "locale"),
        ({"locale": "en_US.UTF-8"}, "locale"),
    ],
)
def test_bad_contact_details_are_422s_naming_the_field(
    api: Api, change: dict[str, Any], field: str
) -> None:
    caller = api.tenant()
    http = api.http(caller)
    answer = http.post("/v1/dunning/failures", json={**FAILURE, **change})
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert field in answer.text
    assert api.store.customers.get_customer(caller.tenant, "cus_1") is None


def test_a_customer_is_read_and_changed_and_a_new_address_clears_a_suppression(
    api: Api,
) -> None:
    caller = api.tenant()
    http = api.http(caller)
    assert http.get("/v1/dunning/customers/cus_1").status_code == 404
    http.post("/v1/dunning/failures", json={**FAILURE, **CONTACT})
    shown = http.get("/v1/dunning/customers/cus_1")
    assert shown.status_code == 200, shown.text
    body = shown.json()
    assert body["email"] == "Ada@example.com" and body["locale"] == "de_DE"
    assert body["access"] == "restricted"  # a failure long past its grace period
    assert body["suppressed"] is False

    api.store.customers.suppress(
        caller.tenant,
        "cus_1",
        email="ada@example.com",
        reason="550 no such user",
        at=datetime.now(UTC),
    )
    assert http.get("/v1/dunning/customers/cus_1").json()["suppressed"] is True
    # The same address again keeps the suppression; another one clears it.
    same = http.put("/v1/dunning/customers/cus_1", json={"email": "ada@EXAMPLE.com"})
    assert same.status_code == 200 and same.json()["suppressed"] is True
    moved = http.put("/v1/dunning/customers/cus_1", json={"email": "ada@new.example"})
    assert moved.json()["suppressed"] is False and moved.json()["suppressed_reason"] is None
    assert moved.json()["name"] == "Ada Lovelace"  # left out: kept
    assert moved.json()["access"] == "restricted"

    # Another tenant sees none of it; a customer is created by a PUT.
    stranger = api.http(api.tenant())
    assert stranger.get("/v1/dunning/customers/cus_1").status_code == 404
    made = stranger.put("/v1/dunning/customers/cus_9", json={"locale": "pt-BR"})
    assert made.status_code == 200 and made.json()["locale"] == "pt_BR"
    assert made.json()["access"] == "active" and made.json()["email"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"email": "not an address"}, "email"),
        ({"name": "a\nb"}, "name"),
        ({"locale": "klingon!"}, "locale"),
        ({"access": "active"}, "access"),  # access follows the invoices: never set
    ],
)
def test_bad_customer_changes_are_422s_naming_the_field(
    api: Api, body: dict[str, Any], field: str
) -> None:
    http = api.http(api.tenant())
    answer = http.put("/v1/dunning/customers/cus_1", json=body)
    assert answer.status_code == 422, answer.text
    assert field in answer.text
    assert http.get("/v1/dunning/customers/cus_1").status_code == 404


RENEWAL: dict[str, Any] = {
    "customer_id": "cus_1",
    "customer_email": "ada@example.com",
    "renews_at": "2030-07-23T15:00:00Z",
    "amount": 1999,
    "currency": "usd",
    "timezone": "America/Chicago",
    "card": {"exp_month": 6, "exp_year": 2030},
}


def test_a_renewal_is_told_once_per_customer_and_instant(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    first = http.post("/v1/dunning/renewals", json=RENEWAL)
    assert first.status_code == 201, first.text
    body = first.json()
    # No SMTP server for this tenant: nothing to send the reminder with.
    assert body["reminder"] == "no_reminder" and body["card"] == {"exp_month": 6, "exp_year": 2030}
    again = http.post("/v1/dunning/renewals", json={**RENEWAL, "amount": 2999})
    assert again.status_code == 200 and again.json()["renewal_id"] == body["renewal_id"]
    assert again.json()["amount"] == 2999
    later = http.post("/v1/dunning/renewals", json={**RENEWAL, "renews_at": "2030-08-23T15:00:00Z"})
    assert later.status_code == 201 and later.json()["renewal_id"] != body["renewal_id"]
    customer = http.get("/v1/dunning/customers/cus_1").json()
    assert customer["email"] == "ada@example.com" and customer["access"] == "active"

    updated = http.post("/v1/dunning/customers/cus_1/payment-method-updated", json={})
    assert updated.status_code == 200, updated.text
    assert updated.json() == {"reminders_cancelled": [], "invoices": []}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"card": {"exp_month": 13, "exp_year": 2030}}, "exp_month"),
        ({"card": {"exp_month": 6}}, "exp_year"),
        ({"card": {"exp_month": 6, "exp_year": 30}}, "exp_year"),
        ({"renews_at": "2030-07-23T15:00:00"}, "renews_at"),
        ({"amount": -1}, "amount"),
        ({"currency": "dollars"}, "currency"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"customer_email": "ada"}, "customer_email"),
        ({"customer_id": ""}, "customer_id"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_renewals_are_422s_naming_the_field(
    api: Api, change: dict[str, Any], field: str
) -> None:
    http = api.http(api.tenant())
    answer = http.post("/v1/dunning/renewals", json={**RENEWAL, **change})
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert field in answer.text
