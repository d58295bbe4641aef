"""A lone UTF-16 surrogate, over real HTTP on both backends: JSON can carry one (`\\ud800`),
Python's json decodes it into a str that no UTF-8 encoder accepts, so it is refused at
validation with a 422 naming the field, and nothing is stored. Problem bodies echo only what
they can encode, cut to a bounded length. And OPTIONS answers every method a route serves."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from recoup.api.echoes import HEADER_ECHO_LIMIT
from recoup.api.problems import ECHO_LIMIT, FieldError, Problem, problem_response
from tests.api.conftest import TARGET, Api
from tests.api.test_dunning_api import FAILURE
from tests.api.test_jobs_api import PROBLEM, assert_problem, job_body, schedule_body

SURROGATE = "\ud800"
INVOICE = "/v1/dunning/invoices/inv_1"
OUTCOME = {"outcome": "failed", "decline_code": "do_not_honor", "advice_code": "try_again_later"}
SETTINGS = {"policy": "", "event_url": TARGET, "charge_url": TARGET}
JOB = job_body(
    name="nightly",
    group="billing",
    target={"url": TARGET, "method": "POST", "headers": {"X-A": "v"}, "body": {"k": ["vv"]}},
)
ANCHORED = schedule_body(
    cron=None, timezone=None, anchor={"local": "2026-01-31T09:00:00", "timezone": "Europe/Paris"}
)

# (method, path, a valid body, the dotted field that gets a surrogate): every string a POST or
# PUT body carries. A key in the path is a dict key (a header name, a body key).
CASES = [
    ("POST", "/v1/jobs", JOB, "name"),
    ("POST", "/v1/jobs", JOB, "group"),
    ("POST", "/v1/jobs", JOB, "target.url"),
    ("POST", "/v1/jobs", JOB, "target.method"),
    ("POST", "/v1/jobs", JOB, "target.headers.X-A"),
    ("POST", "/v1/jobs", JOB, "target.headers.<key>"),
    ("POST", "/v1/jobs", JOB, "target.body.k.0"),
    ("POST", "/v1/jobs", JOB, "target.body.<key>"),
    ("POST", "/v1/jobs/cancel", {"name": "nightly"}, "name"),
    ("POST", "/v1/jobs/cancel", {"name_prefix": "night"}, "name_prefix"),
    ("POST", "/v1/jobs/cancel", {"group": "billing"}, "group"),
    ("POST", "/v1/schedules", schedule_body(name="daily"), "name"),
    ("POST", "/v1/schedules", schedule_body(), "cron"),
    ("POST", "/v1/schedules", schedule_body(), "timezone"),
    ("POST", "/v1/schedules", ANCHORED, "anchor.timezone"),
    ("POST", "/v1/schedules", schedule_body(), "target.url"),
    *[
        ("POST", "/v1/dunning/failures", FAILURE, field)
        for field in [
            "invoice_id",
            "customer_id",
            "currency",
            "timezone",
            "country",
            "decline_code",
            "card.fingerprint",
            "card.network",
            "gateway",
            "merchant_id",
            "charge_url",
        ]
    ],
    ("POST", "/v1/dunning/failures", {**FAILURE, "advice_code": "try_again_later"}, "advice_code"),
    *[
        ("POST", f"{INVOICE}/attempts/1/outcome", OUTCOME, field)
        for field in ["outcome", "decline_code", "advice_code"]
    ],
    *[("PUT", "/v1/dunning/settings", SETTINGS, field) for field in SETTINGS],
]


def with_surrogate(body: dict[str, Any], dotted: str) -> dict[str, Any]:
    """`body` with a surrogate in the string at `dotted` (same length, so that only the
    surrogate is wrong), or a key `<key>` renamed to contain one."""
    body = copy.deepcopy(body)
    *parents, last = dotted.split(".")
    node: Any = body
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if last == "<key>":
        name, value = node.popitem()
        node[name[:1] + SURROGATE + name[2:]] = value
    elif isinstance(node, list):
        node[int(last)] = node[int(last)][:1] + SURROGATE + node[int(last)][2:]
    else:
        node[last] = node[last][:1] + SURROGATE + node[last][2:]
    return body


def raw_json(body: dict[str, Any]) -> bytes:
    """The body as JSON with the surrogate as the escape `\\ud800` (httpx's `json=` encodes to
    UTF-8, which cannot hold a surrogate, and would fail on our side)."""
    content = json.dumps(body).encode()  # ensure_ascii: non-ASCII leaves as \\uXXXX escapes
    assert b"\\ud800" in content
    assert json.loads(content) == body  # what the server's JSON parser gets back
    return content


def stored(http: httpx.Client) -> dict[str, Any]:
    """Everything the tenant has: jobs, schedules, invoices, dunning settings."""
    return {
        "jobs": http.get("/v1/jobs").json(),
        "schedules": http.get("/v1/schedules").json(),
        "invoices": http.get("/v1/dunning/invoices").json(),
        # Unset settings read as of now: their `updated_at` says nothing.
        "settings": http.get("/v1/dunning/settings").json() | {"updated_at": None},
    }


@pytest.mark.parametrize(
    ("method", "path", "body", "field"), CASES, ids=[f"{c[1]}:{c[3]}" for c in CASES]
)
def test_a_lone_surrogate_in_any_string_field_is_a_422_naming_it(
    api: Api, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    http = api.http(api.tenant())
    before = stored(http)
    content = raw_json(with_surrogate(body, field))
    headers = {"Content-Type": "application/json", "Idempotency-Key": "k-1"}
    response = http.request(method, path, content=content, headers=headers)
    problem = assert_problem(response, 422)
    # A key names its dict; anything inside a target's JSON body names the body.
    named = "target.body" if field.startswith("target.body") else field.split(".<key>")[0]
    assert any(e["field"].startswith(named) for e in problem["errors"]), problem
    if field not in ("target.method", "outcome"):  # literals: "expected one of …"
        assert any("surrogate" in e["message"] for e in problem["errors"]), problem
    assert SURROGATE not in response.text
    assert stored(http) == before
    # The key was never claimed: the corrected request runs under it.
    if method == "POST" and path != f"{INVOICE}/attempts/1/outcome":
        fixed = http.request(method, path, json=body, headers=headers)
        assert fixed.status_code < 300, fixed.text


def test_an_unknown_field_named_with_a_surrogate_is_a_422(api: Api) -> None:
    http = api.http(api.tenant())
    content = raw_json({**JOB, "nam" + SURROGATE: "x"})
    response = http.post("/v1/jobs", content=content, headers={"Content-Type": "application/json"})
    assert_problem(response, 422)
    assert stored(http)["jobs"]["jobs"] == []


@pytest.mark.parametrize(
    "path",
    [
        "/v1/jobs/ab%ED%A0%80cd",  # U+D800 as its (invalid) three UTF-8 bytes
        "/v1/jobs/ab%ED%A0%80cd/runs",
        "/v1/schedules/ab%ED%A0%80cd",
        "/v1/dunning/invoices/ab%ED%A0%80cd",
        "/v1/jobs/ab%uD800cd",  # the non-standard %u form: not an escape at all
    ],
)
def test_a_surrogate_in_a_path_segment_never_reaches_a_handler(api: Api, path: str) -> None:
    # The ASGI server decodes percent-escapes as UTF-8 with replacement (U+FFFD): no str with
    # a surrogate can be built from a path. An id that does not exist is a 404.
    http = api.http(api.tenant())
    problem = assert_problem(http.get(path), 404)
    assert SURROGATE not in problem["detail"]


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/v1/jobs", "name_prefix"),
        ("/v1/jobs", "group"),
        ("/v1/jobs", "cursor"),
        ("/v1/schedules", "name"),
        ("/v1/schedules", "cursor"),
        ("/v1/dunning/invoices", "customer_id"),
        ("/v1/dunning/invoices", "cursor"),
    ],
)
def test_a_surrogate_in_a_query_parameter_never_reaches_a_handler(
    api: Api, path: str, param: str
) -> None:
    # Query strings are decoded as UTF-8 with replacement too: U+FFFD, an ordinary character.
    http = api.http(api.tenant())
    response = http.get(f"{path}?{param}=a%ED%A0%80b")
    assert response.status_code in (200, 422), response.text
    if response.status_code == 422:  # a cursor that is not one of ours
        assert_problem(response, 422, param)
    assert SURROGATE not in response.text


def test_a_surrogate_in_an_unknown_query_parameter_is_named_not_echoed_raw(api: Api) -> None:
    http = api.http(api.tenant())
    response = http.get("/v1/schedules?name_prefix=a%ED%A0%80b")
    assert_problem(response, 400, "name_prefix")
    assert SURROGATE not in response.text


def test_an_undecodable_idempotency_key_is_a_400_naming_the_header(api: Api) -> None:
    http = api.http(api.tenant())
    headers = {"Idempotency-Key": b"k-\xed\xa0\x80"}  # header bytes arrive as latin-1 text
    response = http.post("/v1/jobs", json=JOB, headers=headers)  # type: ignore[dict-item]
    assert_problem(response, 400, "Idempotency-Key")
    assert stored(http)["jobs"]["jobs"] == []


def test_a_long_idempotency_key_is_not_echoed_in_full(api: Api) -> None:
    http = api.http(api.tenant())
    response = http.post("/v1/jobs", json=JOB, headers={"Idempotency-Key": "k" * 5000})
    problem = assert_problem(response, 400, "Idempotency-Key")
    assert len(response.content) < 2000
    (error,) = problem["errors"]
    # Cut at HEADER_ECHO_LIMIT characters, with the length said (not at ECHO_LIMIT, which
    # fits values from a body).
    assert error["value"] == "k" * HEADER_ECHO_LIMIT + "\u2026 (5000 characters)"
    assert "k" * (HEADER_ECHO_LIMIT + 1) not in problem["detail"]


def test_a_problem_built_from_anything_encodes() -> None:
    problem = Problem(
        type="urn:recoup:problem:invalid-input",
        title="Unprocessable Entity",
        status=422,
        detail="x" + SURROGATE + "y" * 5000,
        errors=[FieldError(field="a." + SURROGATE, message=SURROGATE, value="v" * 5000)],
    )
    response = problem_response(problem)
    assert response.media_type == PROBLEM
    body = json.loads(response.body)
    assert body["detail"].startswith("x\ufffdy") and len(body["detail"]) <= 1000
    assert body["errors"] == [
        {"field": "a.\ufffd", "message": "\ufffd", "value": "v" * (ECHO_LIMIT - 1) + "\u2026"}
    ]


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/v1/jobs", "GET, POST, OPTIONS"),
        ("/v1/jobs/j-1", "GET, PATCH, DELETE, OPTIONS"),
        ("/v1/jobs/cancel", "GET, POST, PATCH, DELETE, OPTIONS"),  # also /v1/jobs/{job_id}
        ("/v1/schedules/s-1", "GET, PATCH, DELETE, OPTIONS"),
        ("/v1/dunning/settings", "GET, PUT, OPTIONS"),
        ("/v1/dunning/failures", "POST, OPTIONS"),
        ("/healthz", "GET, OPTIONS"),
    ],
)
def test_options_lists_every_method_of_the_route(api: Api, path: str, methods: str) -> None:
    http = api.http()  # no token needed: it reveals no more than /openapi.json
    answer = http.options(path)
    assert answer.status_code == 204, answer.text
    assert answer.headers["allow"] == methods
    # A 405 lists them too, not only those of the first route on the path.
    unused = next(m for m in ("PATCH", "PUT") if m not in methods.split(", "))
    refused = http.request(unused, path)
    assert refused.status_code == 405
    assert refused.headers["allow"] == methods


def test_options_on_an_unknown_path_is_a_404(api: Api) -> None:
    assert_problem(api.http().options("/v1/nothing-here"), 404)
