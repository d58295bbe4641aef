"""GET /v1/dunning/emails/preview: the kinds and the locale's shape are stated in the
document, and a wrong one is a 422 naming the field, the value and what is allowed."""

from __future__ import annotations

from recoup.messages.kinds import MessageKind
from tests.api.conftest import Api


def test_a_preview_renders_each_kind_in_the_asked_locale(api: Api) -> None:
    http = api.http(api.tenant())
    for kind in MessageKind:
        answer = http.get("/v1/dunning/emails/preview", params={"event": kind.value})
        assert answer.status_code == 200, (kind, answer.text)
        assert answer.json()["subject"]
    french = http.get(
        "/v1/dunning/emails/preview", params={"event": "payment_failed", "locale": "fr-FR"}
    )
    assert french.status_code == 200, french.text


def test_an_unknown_kind_is_refused_naming_the_field_and_the_kinds(api: Api) -> None:
    answer = api.http(api.tenant()).get("/v1/dunning/emails/preview", params={"event": "nope"})
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("application/problem+json")
    (error,) = answer.json()["errors"]
    assert error["field"] == "event" and error["value"] == "nope"
    assert "payment_failed" in error["message"] and "card_expiring" in error["message"]


def test_the_document_states_the_kinds_and_the_locales_shape(api: Api) -> None:
    document = api.http(api.tenant()).get("/openapi.json").json()
    found = {
        p["name"]: p for p in document["paths"]["/v1/dunning/emails/preview"]["get"]["parameters"]
    }
    kinds_schema = found["event"]["schema"]
    if "$ref" in kinds_schema:
        kinds_schema = document["components"]["schemas"][kinds_schema["$ref"].rsplit("/", 1)[1]]
    assert set(kinds_schema["enum"]) == {kind.value for kind in MessageKind}
    locale = found["locale"]["schema"]
    assert any("pattern" in option for option in locale.get("anyOf", [locale]))
