"""Customers over real HTTP, on both backends: the contact details a failure carries are
stored on its customer (checked, written one way), bad ones are 422s naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api
from tests.api.test_dunning_api import FAILURE

CONTACT = {"customer_email": "Ada@Example.COM", "customer_name": "Ada Lovelace", "locale": "de-DE"}


def test_a_failure_stores_who_to_write_to_on_its_customer(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    answer = http.post("/v1/dunning/failures", json={**FAILURE, **CONTACT})
    assert answer.status_code == 201, answer.text
    customer = api.store.customers.get_customer(caller.tenant, "cus_1")
    assert customer is not None
    assert (customer.email, customer.name, customer.locale) == (
        "Ada@example.com",
        "Ada Lovelace",
        "de_DE",
    )
    assert customer.access == "active" and not customer.is_suppressed


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
