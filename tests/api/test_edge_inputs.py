"""Edge inputs over real HTTP, on both backends: each is a 4xx problem naming the field (never a
500, never a 503 the client would retry), and nothing is stored."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from recoup.api.problems import Problem, _short, problem_for, problem_response
from recoup.errors import InvalidInput
from tests.api.conftest import TARGET, Api
from tests.api.test_jobs_api import assert_problem, job_body, schedule_body


def no_jobs_stored(api: Api, http: Any) -> bool:
    return http.get("/v1/jobs").json()["jobs"] == []


@pytest.mark.parametrize(
    "run_at",
    [
        "0001-01-01T00:00:00+14:00",  # before year 1 in UTC
        "9999-12-31T23:59:59-14:00",  # after year 9999 in UTC
        "1900-01-01T00:00:00Z",  # representable, but before the accepted years
        "9500-01-01T00:00:00Z",  # representable, but after them
    ],
)
def test_an_extreme_run_at_is_a_422_naming_run_at(api: Api, run_at: str) -> None:
    http = api.http(api.tenant())
    body = {"run_at": run_at, "target": {"url": TARGET}}
    problem = assert_problem(http.post("/v1/jobs", json=body), 422, "run_at")
    assert "1970" in problem["errors"][0]["message"]
    assert no_jobs_stored(api, http)


def test_upcoming_of_an_anchor_near_year_9999_lists_what_exists(api: Api) -> None:
    # The series ends at the last renewal before the end of year 9999: fewer than `count`.
    http = api.http(api.tenant())
    body = schedule_body(
        cron=None,
        timezone=None,
        anchor={"local": "9999-10-31T09:00:00", "timezone": "America/New_York"},
    )
    body = {k: v for k, v in body.items() if v is not None}
    created = http.post("/v1/schedules", json=body)
    assert created.status_code == 201, created.text
    upcoming = http.get(f"/v1/schedules/{created.json()['id']}/upcoming", params={"count": 10})
    assert upcoming.status_code == 200, upcoming.text
    got = [datetime.fromisoformat(t) for t in upcoming.json()["upcoming"]]
    assert [(t.year, t.month) for t in got] == [(9999, 10), (9999, 11), (9999, 12)]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": "a\x00b"}, "name"),
        ({"target": {"url": TARGET + "?q=\x00"}}, "target.url"),
        ({"target": {"url": TARGET, "headers": {"X-A": "v\x00"}}}, "target.headers.X-A"),
        ({"target": {"url": TARGET, "body": {"k": ["ok", "bad\x00"]}}}, "target.body"),
    ],
)
def test_nul_in_a_string_is_a_422_naming_the_field(
    api: Api, overrides: dict[str, Any], field: str
) -> None:
    http = api.http(api.tenant())
    problem = assert_problem(http.post("/v1/jobs", json=job_body(**overrides)), 422)
    assert any(e["field"].startswith(field) for e in problem["errors"]), problem
    assert no_jobs_stored(api, http)


def test_nul_in_a_path_or_query_string_is_a_422_not_a_503(api: Api) -> None:
    http = api.http(api.tenant())
    assert_problem(http.get("/v1/jobs/ab%00cd"), 422, "job_id")
    assert_problem(http.get("/v1/jobs", params={"name_prefix": "a\x00"}), 422, "name_prefix")


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"url": TARGET, "headers": {"X-Evil": "a\r\nInjected: yes"}}, "target.headers"),
        ({"url": TARGET, "headers": {"Bad Name": "v"}}, "target.headers"),
        ({"url": TARGET, "headers": {"X-Accent": "café"}}, "target.headers"),
        ({"url": TARGET, "headers": {"X-Pad": " v"}}, "target.headers"),
        # Reserved: set by the HTTP client or by each delivery, in any case.
        ({"url": TARGET, "headers": {"HOST": "internal.example"}}, "target.headers"),
        ({"url": TARGET, "headers": {"Content-Length": "0"}}, "target.headers"),
        ({"url": TARGET, "headers": {"transfer-encoding": "chunked"}}, "target.headers"),
        ({"url": TARGET, "headers": {"Connection": "close"}}, "target.headers"),
        ({"url": TARGET, "headers": {"Idempotency-Key": "k"}}, "target.headers"),
        ({"url": TARGET, "headers": {"Webhook-Signature": "v1,forged"}}, "target.headers"),
        ({"url": "http://127.0.0.1:9/a path"}, "target.url"),
        ({"url": "http://127.0.0.1:9/\ttab"}, "target.url"),
    ],
)
def test_unsendable_headers_and_urls_are_refused_at_creation(
    api: Api, target: dict[str, Any], field: str
) -> None:
    http = api.http(api.tenant())
    assert_problem(http.post("/v1/jobs", json=job_body(target=target)), 422, field)
    assert_problem(http.post("/v1/schedules", json=schedule_body(target=target)), 422, field)
    assert no_jobs_stored(api, http)
    assert http.get("/v1/schedules").json() == {"schedules": [], "next_cursor": None}


def test_ordinary_headers_are_accepted(api: Api) -> None:
    http = api.http(api.tenant())
    target = {"url": TARGET, "headers": {"Authorization": "Bearer a b", "X-Empty": ""}}
    assert http.post("/v1/jobs", json=job_body(target=target)).status_code == 201


def test_deleting_a_schedule_twice_is_204_twice_and_404_only_if_never_there(api: Api) -> None:
    caller, other = api.tenant(), api.tenant()
    http = api.http(caller)
    created = http.post("/v1/schedules", json=schedule_body()).json()
    assert http.delete(f"/v1/schedules/{created['id']}").status_code == 204
    assert http.delete(f"/v1/schedules/{created['id']}").status_code == 204
    assert_problem(http.delete("/v1/schedules/never-existed"), 404)
    # Another tenant's (deleted) schedule reads as absent, as it always did.
    assert_problem(api.http(other).delete(f"/v1/schedules/{created['id']}"), 404)


def test_the_openapi_document_describes_delete_schedule_as_idempotent(api: Api) -> None:
    spec = api.http().get("/openapi.json").json()
    responses = spec["paths"]["/v1/schedules/{schedule_id}"]["delete"]["responses"]
    assert "already deleted" in responses["204"]["description"]
    assert "never had" in responses["404"]["description"]


def test_a_chunked_body_over_the_limit_has_the_same_problem_type(
    make_api: Callable[..., Api],
) -> None:
    api = make_api(max_body_bytes=1024)
    http = api.http(api.tenant())
    big = job_body(target={"url": TARGET, "body": "x" * 4096})
    by_length = assert_problem(http.post("/v1/jobs", json=big), 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while reading
        payload = json.dumps(big).encode()
        for i in range(0, len(payload), 256):
            yield payload[i : i + 256]

    streamed = http.post("/v1/jobs", content=chunks(), headers={"Content-Type": "application/json"})
    problem = assert_problem(streamed, 413)
    assert problem["type"] == by_length["type"] == "urn:recoup:problem:body-too-large"


@pytest.mark.parametrize("body", ['{"delay_seconds": NaN', '{"delay_seconds": Infinity'])
def test_non_finite_numbers_never_reach_the_problem_body(api: Api, body: str) -> None:
    http = api.http(api.tenant())
    text = body + ', "target": {"url": "' + TARGET + '"}}'
    response = http.post("/v1/jobs", content=text, headers={"Content-Type": "application/json"})
    assert_problem(response, 422, "delay_seconds")
    json.loads(response.text, parse_constant=lambda c: pytest.fail(f"{c} in the body"))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_short_echoes_non_finite_floats_as_text(value: float) -> None:
    assert _short(value) == str(value)
    problem: Problem = problem_for(InvalidInput("x", value, "expected a finite number"))
    json.loads(problem_response(problem).body, parse_constant=lambda c: pytest.fail(c))
