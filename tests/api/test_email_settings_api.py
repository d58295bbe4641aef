"""The email settings of PUT /v1/dunning/settings over real HTTP, on both backends: the
write-only `smtp_url` (stored sealed, never shown again nor echoed in an error; left out:
kept; null: removed), the sender, the link template and the unsubscribe switch; bad values
are 400 problems naming the field."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest

from recoup.sealed import SecretBox
from tests.api.conftest import Api, Caller

PASSWORD = "Ap1Sm7pPa55"
SMTP_URL = f"smtp://billing:{PASSWORD}@127.0.0.1:2525"
SETTINGS: dict[str, Any] = {
    "charge_url": "http://127.0.0.1:9/charge",
    "email_from": "Acme Billing <billing@acme.example>",
    "update_card_url": "https://app.example/billing?token={token}",
}


def put(http: httpx.Client, **fields: Any) -> httpx.Response:
    return http.put("/v1/dunning/settings", json={**SETTINGS, **fields})


def stored_url(api: Api, caller: Caller) -> str | None:
    found = api.store.messages.get_message_settings(caller.tenant)
    if found is None or found.smtp_url is None:
        return None
    assert found.smtp_url.startswith("sealed:v1:") and PASSWORD not in found.smtp_url
    return SecretBox([os.environ["RECOUP_SECRET_KEY"]]).open(found.smtp_url)


def test_the_smtp_url_is_write_only_and_the_rest_is_shown(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)

    answer = put(http, smtp_url=SMTP_URL, allow_unsubscribe=True)
    shown = http.get("/v1/dunning/settings")

    assert answer.status_code == 200, answer.text
    for response in (answer, shown):
        body = response.json()
        assert body["smtp_configured"] is True and "smtp_url" not in body
        assert body["email_from"] == SETTINGS["email_from"]
        assert body["update_card_url"] == SETTINGS["update_card_url"]
        assert body["allow_unsubscribe"] is True
        assert PASSWORD not in response.text
    assert stored_url(api, caller) == SMTP_URL
    # Left out, the URL is kept; null removes it.
    assert put(http).json()["smtp_configured"] is True and stored_url(api, caller) == SMTP_URL
    assert put(http, smtp_url=None).json()["smtp_configured"] is False
    assert stored_url(api, caller) is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"smtp_url": f"imap://u:{PASSWORD}@mail.example"}, "smtp_url"),
        ({"smtp_url": SMTP_URL, "email_from": None}, "email_from"),
        ({"email_from": "not an address"}, "email_from"),
        ({"reply_to": "x@"}, "reply_to"),
        ({"update_card_url": "https://app.example/billing"}, "update_card_url"),
        ({"update_card_url": "http://app.example/b?t={token}"}, "update_card_url"),
    ],
)
def test_a_bad_email_setting_is_a_problem_naming_the_field_and_stores_nothing(
    api: Api, fields: dict[str, Any], field: str
) -> None:
    caller = api.tenant()
    answer = put(api.http(caller), **fields)
    assert answer.status_code in (400, 422), answer.text
    assert field in answer.text and PASSWORD not in answer.text
    assert api.store.messages.get_message_settings(caller.tenant) is None


def test_the_python_client_sets_the_email_settings(api: Api) -> None:
    from recoup.client import Client

    caller = api.tenant()
    with Client(api.url, caller.token) as c:
        shown = c.configure_dunning(
            charge_url="http://127.0.0.1:9/charge",
            smtp_url=SMTP_URL,
            email_from="Acme Billing <billing@acme.example>",
            allow_unsubscribe=True,
        )
        assert shown.smtp_configured is True and shown.allow_unsubscribe is True
        assert c.dunning_settings().email_from == "Acme Billing <billing@acme.example>"
    assert stored_url(api, caller) == SMTP_URL
