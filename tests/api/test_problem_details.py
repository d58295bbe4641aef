"""Problems that say what is wrong and what is allowed: every invalid field in the `detail`,
strict JSON types, past instants refused unless asked for, header values echoed safely, the
framework's own errors in the same shape, and the content type a body must come with."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from recoup.api.app import create_app
from recoup.api.problems import PROBLEM_MEDIA_TYPE
from recoup.storage import Store
from recoup.timekeeping.clock import VirtualClock
from recoup.wire.schemas.common import BETWEEN_FIELDS, StrictModel
from tests.api.conftest import TARGET, Api, api_settings
from tests.support import ServerThread

URN = "urn:recoup:problem:"


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_MEDIA_TYPE
    body: dict[str, Any] = response.json()
    assert body["type"].startswith(URN) and body["status"] == status
    return body


def later() -> str:
    return (datetime.now(UTC) + timedelta(hours=1)).isoformat()


# -- 1. The detail says why, for every field at once ------------------------------------------


def test_the_detail_gives_each_invalid_fields_reason(api: Api) -> None:
    http = api.http(api.tenant())
    job = {"run_at": 1700000000, "target": {"url": "ftp://x"}, "timeout_seconds": -1}
    body = problem(http.post("/v1/jobs", json=job), 422)
    detail = body["detail"]
    assert "run_at: expected an RFC 3339 date-time" in detail and "got 1700000000" in detail
    assert "target.url: expected an http:// or https:// URL" in detail and 'got "ftp://x"' in detail
    assert "timeout_seconds: expected a number ≥ 0.001, got -1" in detail
    assert "Value error" not in str(body)
    assert [e["field"] for e in body["errors"]] == ["run_at", "target.url", "timeout_seconds"]


def test_a_rule_between_fields_is_reported_with_the_fields_own_errors(api: Api) -> None:
    http = api.http(api.tenant())
    # Neither run_at nor delay_seconds, and a bad timeout: both at once, not one per request.
    body = problem(
        http.post("/v1/jobs", json={"target": {"url": TARGET}, "timeout_seconds": -1}), 422
    )
    assert {e["field"] for e in body["errors"]} == {"timeout_seconds", "run_at", "delay_seconds"}
    assert "expected exactly one of run_at and delay_seconds" in body["detail"]
    schedule = {"target": {"url": TARGET}, "cron": "0 9 * * *", "timeout_seconds": 0}
    body = problem(http.post("/v1/schedules", json=schedule), 422)
    assert {e["field"] for e in body["errors"]} == {"timeout_seconds", "timezone"}
    assert "timezone: a cron schedule needs a timezone" in body["detail"]


# -- 2. Strict types ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/jobs", {"delay_seconds": "60"}, "delay_seconds"),
        ("/v1/jobs", {"delay_seconds": 60, "timeout_seconds": "5"}, "timeout_seconds"),
        ("/v1/jobs", {"delay_seconds": 60, "retry": {"max_attempts": "3"}}, "retry.max_attempts"),
        ("/v1/jobs", {"delay_seconds": 60, "retry": {"max_attempts": 2.5}}, "retry.max_attempts"),
        ("/v1/jobs", {"delay_seconds": True}, "delay_seconds"),
        ("/v1/jobs", {"run_at": later(), "allow_past": "yes"}, "allow_past"),
        ("/v1/jobs", {"run_at": 1767225600}, "run_at"),  # no Unix time for an instant
        (
            "/v1/schedules",
            {"anchor": {"local": "2026-01-31T09:00:00", "timezone": "UTC", "interval": "2"}},
            "anchor.interval",
        ),
    ],
)
def test_a_value_of_the_wrong_json_type_is_refused_naming_the_field(
    api: Api, path: str, body: dict[str, Any], field: str
) -> None:
    http = api.http(api.tenant())
    answer = problem(http.post(path, json={"target": {"url": TARGET}, **body}), 422)
    assert [e["field"] for e in answer["errors"]] == [field]
    assert answer["detail"].startswith(f"{field}: expected ")


def test_an_integer_written_with_a_zero_fraction_is_still_an_integer(api: Api) -> None:
    http = api.http(api.tenant())
    job = {"delay_seconds": 60, "target": {"url": TARGET}, "retry": {"max_attempts": 3.0}}
    response = http.post("/v1/jobs", json=job)
    assert response.status_code == 201 and response.json()["retry"]["max_attempts"] == 3


# -- 3. Instants in the past ------------------------------------------------------------------


def test_a_run_at_in_the_past_is_refused_unless_allowed(api: Api) -> None:
    http = api.http(api.tenant())
    job = {"run_at": "2001-01-01T00:00:00Z", "target": {"url": TARGET}}
    body = problem(http.post("/v1/jobs", json=job), 422)
    (error,) = body["errors"]
    assert error["field"] == "run_at" and error["value"].startswith("2001-01-01T00:00:00")
    assert "expected an instant no earlier than" in body["detail"]
    assert '"allow_past": true' in body["detail"]
    allowed = http.post("/v1/jobs", json={**job, "allow_past": True})
    assert allowed.status_code == 201, allowed.text
    assert allowed.json()["run_at"] == "2001-01-01T00:00:00Z"


def test_a_run_at_a_little_in_the_past_is_within_the_tolerance(api: Api) -> None:
    http = api.http(api.tenant())
    run_at = (datetime.now(UTC) - timedelta(minutes=2)).isoformat()
    response = http.post("/v1/jobs", json={"run_at": run_at, "target": {"url": TARGET}})
    assert response.status_code == 201, response.text


@pytest.fixture
def api_in_2040(store: Store) -> Iterator[httpx.Client]:
    """A server whose clock (a virtual one, as a test clock's) reads 2040-01-01T00:05Z."""
    from recoup.storage import open_api_tables

    clock = VirtualClock(datetime(2040, 1, 1, 0, 5, tzinfo=UTC))
    app = create_app(store, clock=clock, settings=api_settings())
    with ServerThread(app) as server:
        caller = Api(server.url, store, open_api_tables(store), app).tenant()
        with httpx.Client(base_url=server.url, headers=caller.auth) as http:
            yield http


def test_the_past_is_judged_by_the_servers_clock_not_the_wall_clock(
    api_in_2040: httpx.Client,
) -> None:
    target = {"url": TARGET}
    # In the wall clock's future, in the server's past: refused, naming the server's instant.
    body = problem(
        api_in_2040.post("/v1/jobs", json={"run_at": "2039-06-01T00:00:00Z", "target": target}), 422
    )
    assert "no earlier than 2040-01-01T00:00:00+00:00" in body["detail"]
    fine = api_in_2040.post("/v1/jobs", json={"run_at": "2040-01-01T00:01:00Z", "target": target})
    assert fine.status_code == 201, fine.text


# -- 4. Header values echoed safely -----------------------------------------------------------


def test_a_unicode_idempotency_key_is_echoed_as_sent_not_garbled(api: Api) -> None:
    http = api.http(api.tenant())
    key = "clé\tété"  # a tab: allowed inside a header value, not printable in a detail
    headers = {"Idempotency-Key": key.encode()}
    response = http.post(
        "/v1/jobs", json={"delay_seconds": 5, "target": {"url": TARGET}}, headers=headers
    )  # type: ignore[dict-item]
    body = problem(response, 400)
    assert "clé\\x09été" in body["detail"] and "Ã" not in body["detail"]
    assert body["errors"][0]["value"] == "clé\\x09été"


def test_a_long_header_value_is_cut_and_its_length_said(api: Api) -> None:
    http = api.http(api.tenant())
    headers = {"Idempotency-Key": "k" * 5000}
    response = http.post(
        "/v1/jobs", json={"delay_seconds": 5, "target": {"url": TARGET}}, headers=headers
    )
    body = problem(response, 400)
    shown = "k" * 64 + "\u2026 (5000 characters)"
    assert shown in body["detail"] and "k" * 65 not in body["detail"]
    assert body["errors"][0]["value"] == shown


# -- 5. The body's content type and shape ----------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "named"),
    [
        ("text/plain", "text/plain"),
        ("application/x-www-form-urlencoded", "application/x-www-form-urlencoded"),
        (None, "none"),
    ],
)
def test_a_body_not_sent_as_json_is_a_415_naming_the_type(
    api: Api, content_type: str | None, named: str
) -> None:
    http = api.http(api.tenant())
    headers = {} if content_type is None else {"Content-Type": content_type}
    response = http.post("/v1/jobs", content=b'{"delay_seconds": 5}', headers=headers)
    body = problem(response, 415)
    assert "application/json" in body["detail"] and f"got Content-Type: {named}" in body["detail"]
    assert "dictionary" not in body["detail"]
    assert response.headers["Accept-Post"] == "application/json"


def test_malformed_json_is_placed_by_line_and_column(api: Api) -> None:
    http = api.http(api.tenant())
    text = '{"delay_seconds": 5,\n  "target" {"url": "x"}}'
    response = http.post("/v1/jobs", content=text, headers={"Content-Type": "application/json"})
    body = problem(response, 422)
    assert "not valid JSON" in body["detail"] and "line 2, column 12" in body["detail"]


@pytest.mark.parametrize(("value", "kind"), [([1, 2], "an array"), ("job", '"job"'), (5, "5")])
def test_a_json_body_that_is_not_an_object_says_so(api: Api, value: Any, kind: str) -> None:
    http = api.http(api.tenant())
    body = problem(http.post("/v1/jobs", json=value), 422)
    assert body["detail"] == f"body: expected a JSON object, got {kind}"


# -- 6. The framework's own errors -----------------------------------------------------------


def test_an_unknown_path_is_a_problem_naming_it(api: Api) -> None:
    http = api.http(api.tenant())
    body = problem(http.get("/v1/nowhere"), 404)
    assert body["type"] == URN + "not-found" and "/v1/nowhere" in body["detail"]


@pytest.mark.parametrize(("method", "path"), [("DELETE", "/v1/jobs"), ("PUT", "/v1/schedules")])
def test_a_method_not_allowed_names_the_allowed_ones_as_allow_does(
    api: Api, method: str, path: str
) -> None:
    http = api.http(api.tenant())
    response = http.request(method, path)
    body = problem(response, 405)
    assert body["type"] == URN + "method-not-allowed"
    allow = response.headers["Allow"]
    assert body["detail"] == f"{method} is not allowed on {path}; allowed: {allow}"


def test_json_nested_too_deeply_is_a_problem_saying_so(api: Api) -> None:
    http = api.http(api.tenant())
    text = "[" * 100_000 + "]" * 100_000
    response = http.post("/v1/jobs", content=text, headers={"Content-Type": "application/json"})
    body = problem(response, 400)
    assert body["type"] == URN + "malformed-body" and "nested" in body["detail"]


class _Inner(StrictModel):
    exactly_one = (("a", "b"),)
    a: int | None = None
    b: int | None = None


class _Outer(StrictModel):
    exactly_one = (("x", "y"),)
    inner: _Inner
    x: int | None = None
    y: int | None = None
    z: int = 0


def test_rules_between_fields_of_nested_bodies_are_all_reported() -> None:
    # The outer model raises its rule's errors again with the inner model's (custom) ones.
    with pytest.raises(ValidationError) as refused:
        _Outer.model_validate({"inner": {"a": 1, "b": 2}, "z": "q"})
    found = [(e["loc"], e["type"]) for e in refused.value.errors()]
    assert found == [
        (("inner", "a"), BETWEEN_FIELDS),
        (("inner", "b"), BETWEEN_FIELDS),
        (("z",), "int_parsing"),
        (("x",), BETWEEN_FIELDS),
        (("y",), BETWEEN_FIELDS),
    ]
