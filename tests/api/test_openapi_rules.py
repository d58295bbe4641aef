"""The OpenAPI document states each rule the server enforces, so what a client generated from
it sends is accepted, and what it refuses is what the document rules out. Each test names the
request schemathesis found (tests/fuzz/test_api_schemathesis.py) that the document called valid
and the server refused; the rules are validation, the same on both backends, so these run
in-process over SQLite."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.api.app import ApiSettings, create_app
from recoup.idempotency import KEY_HEADER_PATTERN, parse_key
from recoup.jobs.ssrf import SsrfGuard
from recoup.storage.job_rows import CURSOR_PATTERN
from recoup.storage.sqlite.store import SqliteStore
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.calendar import BusinessCalendar
from recoup.timekeeping.clock import SystemClock
from recoup.timekeeping.zones import zone
from recoup.wire.schemas.codes import COUNTRIES, TIME_ZONES
from recoup.wire.schemas.patterns import CRON_FORMAT, POLICY_FORMAT
from tests.fuzz.strategies import cron_expressions, policies
from tests.receiver.conftest import InProcess

TARGET = "http://127.0.0.1:9/hook"


@pytest.fixture(scope="module")
def app_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteStore]:
    store = SqliteStore(str(tmp_path_factory.mktemp("rules") / "recoup.db"))
    yield store
    store.close()


@pytest.fixture(scope="module")
def document(app_store: SqliteStore) -> dict[str, Any]:
    return create_app(app_store, clock=SystemClock()).openapi()


@pytest.fixture(scope="module")
def http(app_store: SqliteStore) -> Iterator[httpx.Client]:
    app = create_app(
        app_store,
        clock=SystemClock(),
        settings=ApiSettings(ssrf=SsrfGuard(allow_private=True), prune_every=None),
    )
    now = SystemClock().now()
    app_store.ensure_tenant(new_tenant("rules", now=now))
    token = issue_token(app_store.api_tables(), "rules", now=now).secret
    with httpx.Client(
        transport=InProcess(app),
        base_url="http://api.test",
        headers={"Authorization": f"Bearer {token}"},
    ) as client:
        yield client


def parameter(document: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    for found in document["paths"][path][method]["parameters"]:
        if found["name"] == name:
            schema: dict[str, Any] = found["schema"]
            return schema
    raise AssertionError(f"{method.upper()} {path} has no parameter {name}")


# -- Idempotency-Key -------------------------------------------------------------------------


def test_the_document_states_the_idempotency_key_format(document: dict[str, Any]) -> None:
    # schemathesis: `Idempotency-Key: ` (empty) was valid by the document and answered 400.
    for path, method in [("/v1/jobs", "post"), ("/v1/dunning/invoices/{invoice_id}/paid", "post")]:
        stated = parameter(document, path, method, "Idempotency-Key")
        assert stated["pattern"] == KEY_HEADER_PATTERN


@settings(max_examples=200)
@given(st.from_regex(KEY_HEADER_PATTERN, fullmatch=True))
def test_every_key_of_the_stated_format_is_accepted(header: str) -> None:
    assert parse_key(header) == header.strip('"')


def test_an_empty_idempotency_key_is_a_400_naming_the_header(http: httpx.Client) -> None:
    response = http.post(
        "/v1/jobs",
        json={"delay_seconds": 60, "target": {"url": TARGET}},
        headers={"Idempotency-Key": ""},
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "Idempotency-Key"


# -- List cursors ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/dunning/invoices"])
def test_the_document_states_the_cursor_format(document: dict[str, Any], path: str) -> None:
    # schemathesis: `GET /v1/jobs?cursor=0` was valid by the document and answered 422.
    stated = parameter(document, path, "get", "cursor")["anyOf"][0]
    assert stated["pattern"] == CURSOR_PATTERN


@settings(max_examples=50)
@given(
    path=st.sampled_from(["/v1/jobs", "/v1/dunning/invoices"]),
    cursor=st.from_regex(CURSOR_PATTERN, fullmatch=True).filter(lambda c: len(c) <= 500),
)
def test_any_cursor_of_the_stated_format_is_a_page_position(
    http: httpx.Client, path: str, cursor: str
) -> None:
    response = http.get(path, params={"cursor": cursor})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("cursor", ["0", "abc", ":x", "12:", "1" * 18 + ":x"])
def test_a_cursor_outside_the_format_is_a_422_naming_it(http: httpx.Client, cursor: str) -> None:
    response = http.get("/v1/jobs", params={"cursor": cursor})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "cursor"


# -- Exactly one of several fields -----------------------------------------------------------

JOB = {"target": {"url": TARGET}}
SCHEDULE = {"target": {"url": TARGET}}
ANCHOR = {"local": "2026-01-31T09:00", "timezone": "UTC"}  # a wall-clock reading, no offset
EXACTLY_ONE = [
    # (schema, path, body, valid by the document and by the server)
    ("JobIn", "/v1/jobs", {**JOB}, False),  # schemathesis: neither run_at nor delay_seconds
    ("JobIn", "/v1/jobs", {**JOB, "run_at": "2030-01-01T00:00:00Z", "delay_seconds": 0}, False),
    ("JobIn", "/v1/jobs", {**JOB, "run_at": None, "delay_seconds": 5}, True),
    ("JobIn", "/v1/jobs", {**JOB, "run_at": "2030-01-01T00:00:00Z"}, True),
    ("CancelIn", "/v1/jobs/cancel", {}, False),  # schemathesis: `{}`
    ("CancelIn", "/v1/jobs/cancel", {"name": "a", "name_prefix": "a"}, False),
    ("CancelIn", "/v1/jobs/cancel", {"name": "a", "group": None}, True),
    ("CancelIn", "/v1/jobs/cancel", {"group": "g"}, True),
    ("ScheduleIn", "/v1/schedules", {**SCHEDULE}, False),  # schemathesis: neither rule
    ("ScheduleIn", "/v1/schedules", {**SCHEDULE, "cron": "0 9 * * *"}, False),  # no timezone
    (
        "ScheduleIn",
        "/v1/schedules",
        {**SCHEDULE, "cron": "0 9 * * *", "timezone": "UTC", "anchor": ANCHOR},
        False,
    ),
    ("ScheduleIn", "/v1/schedules", {**SCHEDULE, "anchor": ANCHOR, "timezone": "UTC"}, False),
    ("ScheduleIn", "/v1/schedules", {**SCHEDULE, "cron": "0 9 * * *", "timezone": "UTC"}, True),
    ("ScheduleIn", "/v1/schedules", {**SCHEDULE, "anchor": ANCHOR, "cron": None}, True),
]


@pytest.mark.parametrize(("schema", "path", "body", "valid"), EXACTLY_ONE)
def test_the_document_and_the_server_agree_on_exactly_one_of(
    document: dict[str, Any],
    http: httpx.Client,
    schema: str,
    path: str,
    body: dict[str, Any],
    valid: bool,
) -> None:
    assert conforms(document, schema, body) is valid
    response = http.post(path, json=body)
    assert (response.status_code < 300) is valid, response.text


def conforms(document: dict[str, Any], schema: str, instance: Any) -> bool:
    """Whether `instance` is valid by the document's component `schema`."""
    validator = jsonschema_rs.validator_for(
        {**document["components"]["schemas"][schema], "components": document["components"]},
        validate_formats=True,
    )
    return bool(validator.is_valid(instance))


# -- Strings the stores can hold -------------------------------------------------------------

SOME_TEXT = st.text(st.sampled_from("a\x00@é\u2028"), max_size=4)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | SOME_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SOME_TEXT, inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=60)
@given(body=JSON_VALUES)
def test_a_target_body_is_accepted_exactly_when_the_document_allows_it(
    document: dict[str, Any], http: httpx.Client, body: Any
) -> None:
    # schemathesis: a body holding "\u0000" was valid by the document and answered 422.
    job = {"delay_seconds": 60, "target": {"url": TARGET, "body": body}}
    valid = conforms(document, "JobIn", job)
    assert (http.post("/v1/jobs", json=job).status_code == 201) is valid


@settings(max_examples=40)
@given(name=SOME_TEXT.filter(bool), path=st.sampled_from(["/v1/jobs", "/v1/schedules"]))
def test_a_name_is_accepted_exactly_when_the_document_allows_it(
    document: dict[str, Any], http: httpx.Client, name: str, path: str
) -> None:
    # A NUL (no store holds it) or an '@' (it names a schedule's occurrences) is refused.
    body: dict[str, Any] = {"target": {"url": TARGET}, "name": f"{name}-{uuid.uuid4()}"}
    if path == "/v1/jobs":
        body |= {"delay_seconds": 60}
        schema = "JobIn"
    else:
        body |= {"cron": "0 9 * * *", "timezone": "UTC"}
        schema = "ScheduleIn"
    valid = conforms(document, schema, body)
    assert valid is ("\x00" not in name and "@" not in name)
    response = http.post(path, json=body)
    assert (response.status_code == 201) is valid, response.text


@pytest.mark.parametrize(("length", "valid"), [(150, True), (151, False), (200, False)])
def test_a_schedule_name_is_at_most_150_characters_in_the_document_too(
    document: dict[str, Any], http: httpx.Client, length: int, valid: bool
) -> None:
    # schemathesis: a 200-character name was valid by the document (maxLength 200) and the
    # scheduler refused it (150, leaving room for '@' and the instant in occurrence names).
    name = uuid.uuid4().hex.ljust(length, "n")
    body = {"target": {"url": TARGET}, "cron": "0 9 * * *", "timezone": "UTC", "name": name}
    assert conforms(document, "ScheduleIn", body) is valid
    assert (http.post("/v1/schedules", json=body).status_code == 201) is valid


# -- URLs of targets, charge endpoints and event receivers -----------------------------------

URLS = st.builds(
    "{}{}{}{}{}".format,
    st.sampled_from(["http://", "HTTPS://", "ftp://", "http:/", ""]),
    st.sampled_from(["", "user:pw@", "@"]),
    st.sampled_from(
        ["example.com", "127.0.0.1", "[::1]", "[::ffff:10.0.0.1]", "[:::]", "bücher.de", ""]
    ),
    st.sampled_from(["", ":8080", ":65535", ":65536", ":", ":x"]),
    st.sampled_from(["", "/", "/a?b=c#d", "/a b", "/\t", "/é", "?q"]),
)


@settings(max_examples=150)
@given(url=URLS, field=st.sampled_from(["target.url", "charge_url", "event_url"]))
def test_a_url_is_accepted_exactly_when_the_document_allows_it(
    document: dict[str, Any], http: httpx.Client, url: str, field: str
) -> None:
    # schemathesis: `{"target": {"url": "0"}}` was valid by the document (any string) and was
    # refused: only http(s) URLs with a host are.
    if field == "target.url":
        schema, path, body = "JobIn", "/v1/jobs", {"delay_seconds": 60, "target": {"url": url}}
    else:
        schema, path, body = "SettingsIn", "/v1/dunning/settings", {field: url}
    valid = conforms(document, schema, body)
    response = http.request("PUT" if schema == "SettingsIn" else "POST", path, json=body)
    assert (response.status_code < 300) is valid, response.text
    if not valid:
        assert response.json()["errors"][0]["field"] == field


# -- A target's headers and body -------------------------------------------------------------

HEADER_NAMES = st.sampled_from(
    [
        *["X-A", "authorization", "X_Y.z~", "Recoup", "", "a b", "é", "x\x00", "x:y"],
        *["HOST", "content-length", "Connection", "Idempotency-Key", "Webhook-Id", "recoup-x"],
    ]
)
HEADER_VALUES = st.sampled_from(["", "v", "a b", " v", "v ", "a\tb", "é", "a\r\nb", "\x00", "~"])


@settings(max_examples=100)
@given(
    headers=st.dictionaries(HEADER_NAMES, HEADER_VALUES, max_size=2),
    method=st.sampled_from(["GET", "POST", "HEAD", "OPTIONS", "DELETE"]),
    body=st.sampled_from([None, "text", {"k": 1}]),
)
def test_a_target_is_accepted_exactly_when_the_document_allows_it(
    document: dict[str, Any], http: httpx.Client, headers: dict[str, str], method: str, body: Any
) -> None:
    # schemathesis: a header named "" (and a HEAD target with a body) was valid by the document
    # and refused by the scheduler's checks.
    target: dict[str, Any] = {"url": TARGET, "method": method, "headers": headers}
    if body is not None:
        target["body"] = body
    job = {"delay_seconds": 60, "target": target}
    valid = conforms(document, "JobIn", job)
    response = http.post("/v1/jobs", json=job)
    assert (response.status_code == 201) is valid, response.text


# -- Date-times ------------------------------------------------------------------------------

INSTANTS = st.builds(
    "{}-{}-{}{}{}:{}:{}{}{}".format,
    st.sampled_from(["2026", "1970", "1971", "8999", "9000", "0001", "9999", "1900"]),
    st.sampled_from(["01", "02", "13"]),
    st.sampled_from(["01", "29", "30", "31"]),
    st.sampled_from(["T", "t", " "]),
    st.sampled_from(["00", "23", "24"]),
    st.sampled_from(["00", "59"]),
    st.sampled_from(["00", "59", "60"]),
    st.sampled_from(["", ".5", ".1234567"]),
    st.sampled_from(["Z", "z", "+14:00", "-23:59", "+24:00", ""]),
) | st.sampled_from(["2026-01-01T00:00Z", "2026-01-01", "tomorrow", "1767225600"])


@settings(max_examples=150)
@given(instant=INSTANTS | st.integers(0, 2**33).map(int))
def test_an_instant_is_accepted_exactly_when_the_document_allows_it(
    document: dict[str, Any], http: httpx.Client, instant: str | int
) -> None:
    # schemathesis: run_at "0914-06-10T11:54:49.6138+13:03" was a valid date-time by the
    # document and refused (instants fall in 1970–9000 UTC); so was a Unix timestamp taken.
    # `allow_past`: the document cannot compare an instant with the server's clock, so the
    # rule on past instants is tested apart (tests/api/test_problem_details.py).
    job = {"run_at": instant, "target": {"url": TARGET}, "allow_past": True}
    valid = conforms(document, "JobIn", job)
    response = http.post("/v1/jobs", json=job)
    assert (response.status_code == 201) is valid, response.text


LOCALS = st.builds(
    "{}-{}-{}T{}{}".format,
    st.sampled_from(["2026", "2024", "2000", "1900", "0001", "9999", "0000"]),
    st.sampled_from(["01", "02", "04", "12", "13"]),
    st.sampled_from(["01", "28", "29", "30", "31", "32"]),
    st.sampled_from(["09:00", "23:59", "24:00"]),
    st.sampled_from(["", ":30", ":30.5", ":60", "Z", "+01:00"]),
)


@settings(max_examples=150)
@given(local=LOCALS)
def test_an_anchor_is_accepted_exactly_when_the_document_allows_it(
    document: dict[str, Any], http: httpx.Client, local: str
) -> None:
    # schemathesis: anchor.local "2000-01-01T00:00:00Z" was valid by the document (it said
    # `date-time`, which has an offset) and refused: an anchor is a wall-clock reading.
    body = {"target": {"url": TARGET}, "anchor": {"local": local, "timezone": "UTC"}}
    valid = conforms(document, "ScheduleIn", body)
    response = http.post("/v1/schedules", json=body)
    assert (response.status_code == 201) is valid, response.text


# -- Codes: time zones, countries, currencies ------------------------------------------------


@settings(max_examples=80)
@given(
    timezone=st.sampled_from(["UTC", "Europe/Paris", "localtime", "Mars/Olympus", "utc", ""]),
    country=st.sampled_from([None, "US", "us", "Us", "FR", "ZZ", "USA", "", "U1"]),
    currency=st.sampled_from(["usd", "EUR", "us", "usdd", "123", "u$d", "été"]),
)
def test_a_failure_is_accepted_exactly_when_the_document_allows_its_codes(
    document: dict[str, Any],
    http: httpx.Client,
    timezone: str,
    country: str | None,
    currency: str,
) -> None:
    # schemathesis: currency "000" and timezone "0" were valid by the document (3 and 1–64
    # characters) and refused: currencies are three letters, zones are IANA names.
    failure = {
        "invoice_id": f"inv-{uuid.uuid4()}",
        "customer_id": "c",
        "amount": 100,
        "currency": currency,
        "failed_at": "2026-06-23T15:00:00Z",
        "timezone": timezone,
        "country": country,
        "charge_url": TARGET,
    }
    valid = conforms(document, "FailureIn", failure)
    response = http.post("/v1/dunning/failures", json=failure)
    assert (response.status_code == 201) is valid, response.text


@pytest.mark.parametrize(
    ("rule", "valid"),
    [
        ({"cron": "0 9 * * *", "timezone": "America/New_York"}, True),
        ({"cron": "0 9 * * *", "timezone": "Nowhere/Land"}, False),
        ({"cron": "0 9 * * *", "timezone": "localtime"}, False),  # the machine's, not IANA's
        ({"anchor": {"local": "2026-01-31T09:00", "timezone": "Asia/Tokyo"}}, True),
        ({"anchor": {"local": "2026-01-31T09:00", "timezone": "Nowhere"}}, False),
    ],
)
def test_a_schedule_zone_is_one_the_document_lists(
    document: dict[str, Any], http: httpx.Client, rule: dict[str, Any], valid: bool
) -> None:
    body = {"target": {"url": TARGET}, **rule}
    assert conforms(document, "ScheduleIn", body) is valid
    assert (http.post("/v1/schedules", json=body).status_code == 201) is valid


# -- Status codes ----------------------------------------------------------------------------


def test_a_replayed_failure_answers_a_documented_200(
    document: dict[str, Any], http: httpx.Client
) -> None:
    # schemathesis: the same failure twice answered 200, which the document did not list.
    failure = {
        "invoice_id": f"inv-{uuid.uuid4()}",
        "customer_id": "c",
        "amount": 100,
        "currency": "usd",
        "failed_at": "2026-06-23T15:00:00Z",
        "timezone": "UTC",
        "charge_url": TARGET,
    }
    assert http.post("/v1/dunning/failures", json=failure).status_code == 201
    again = http.post("/v1/dunning/failures", json=failure)
    assert again.status_code == 200
    documented = document["paths"]["/v1/dunning/failures"]["post"]["responses"]
    assert documented["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/InvoiceOut"
    }


@pytest.mark.parametrize(
    ("amount", "valid"),
    [(1999, True), (1999.0, True), (19.99, False), ("1999", False), (True, False), (0.0, False)],
)
def test_an_amount_is_an_integer_as_json_schema_means_it(
    document: dict[str, Any], http: httpx.Client, amount: Any, valid: bool
) -> None:
    # schemathesis: amount 62959.0 is an `integer` by JSON Schema, and the server refused it.
    failure = {
        "invoice_id": f"inv-{uuid.uuid4()}",
        "customer_id": "c",
        "amount": amount,
        "currency": "usd",
        "failed_at": "2026-06-23T15:00:00Z",
        "timezone": "UTC",
        "charge_url": TARGET,
    }
    assert conforms(document, "FailureIn", failure) is valid
    response = http.post("/v1/dunning/failures", json=failure)
    assert (response.status_code == 201) is valid, response.text
    if valid:
        assert response.json()["amount"] == 1999


# -- Texts in languages of their own: cron expressions, policies -----------------------------


def test_cron_and_policy_texts_name_their_format(document: dict[str, Any]) -> None:
    # schemathesis: cron "0" and policy "" were valid strings by the document and refused by
    # their parsers. The document now names the language; tests/fuzz/strategies.py generates
    # texts of it for schemathesis.
    schemas = document["components"]["schemas"]
    cron = schemas["ScheduleIn"]["properties"]["cron"]["anyOf"][0]
    policy = schemas["SettingsIn"]["properties"]["policy"]["anyOf"][0]
    assert (cron["format"], policy["format"]) == (CRON_FORMAT, POLICY_FORMAT)


@settings(max_examples=40)
@given(cron=cron_expressions())
def test_every_cron_expression_of_the_format_is_accepted(http: httpx.Client, cron: str) -> None:
    body = {"target": {"url": TARGET}, "cron": cron, "timezone": "Europe/Paris"}
    response = http.post("/v1/schedules", json=body)
    assert response.status_code == 201, response.text


@settings(max_examples=10)
@given(policy=policies())
def test_every_policy_of_the_format_is_accepted(http: httpx.Client, policy: str) -> None:
    response = http.put("/v1/dunning/settings", json={"policy": policy})
    assert response.status_code == 200, response.text


def test_the_longest_policy_the_document_allows_fits_the_body_limit(
    document: dict[str, Any], http: httpx.Client
) -> None:
    # The document allowed 65,536 characters, which a client escaping non-BMP characters
    # (12 bytes each) sends as 786 KiB: a 413 for a request the document called valid. With
    # an experiment's policy beside the tenant's, both at the longest, it still fits.
    properties = document["components"]["schemas"]["SettingsIn"]["properties"]
    longest = properties["policy"]["anyOf"][0]["maxLength"]
    assert properties["experiment_policy"]["anyOf"][0]["maxLength"] == longest
    url = "http://example.com/" + "a" * (2048 - 19)
    body = {
        "policy": "\U0001f600" * longest,
        "event_url": url,
        "charge_url": url,
        "experiment_name": "\U0001f600" * 100,
        "experiment_policy": "\U0001f600" * longest,
        "experiment_share": 0.5,
    }
    response = http.put(
        "/v1/dunning/settings",
        content=json.dumps(body, ensure_ascii=True),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422  # read, and refused as TOML, not as too large
    assert response.json()["errors"][0]["field"] == "policy"


@pytest.mark.parametrize(
    ("experiment", "valid"),
    [
        ({}, True),
        ({"experiment_name": None, "experiment_policy": None, "experiment_share": None}, True),
        ({"experiment_name": "x", "experiment_share": 0.5}, False),  # no policy
        ({"experiment_name": "x", "experiment_policy": None, "experiment_share": 0.5}, False),
        ({"experiment_share": 0.5}, False),
    ],
)
def test_the_experiment_fields_go_together_in_the_document_too(
    document: dict[str, Any], http: httpx.Client, experiment: dict[str, Any], valid: bool
) -> None:
    # schemathesis: {"experiment_name": "…"} alone was valid by the document and refused.
    body = {"charge_url": TARGET, **experiment}
    assert conforms(document, "SettingsIn", body) is valid
    assert (http.put("/v1/dunning/settings", json=body).status_code == 200) is valid


# -- Links: what to call next with what a response gave --------------------------------------

LINKED = [
    ("/v1/jobs", "post", "201", {"GetJob", "CancelJob", "GetJobRuns"}),
    ("/v1/schedules", "post", "201", {"GetSchedule", "DeleteSchedule", "PauseSchedule"}),
    ("/v1/dunning/failures", "post", "201", {"GetInvoice", "MarkPaid", "ReportFirstOutcome"}),
    ("/v1/dunning/failures", "post", "200", {"GetInvoice", "GetFirstAttemptJob"}),
]


@pytest.mark.parametrize(("path", "method", "status", "names"), LINKED)
def test_created_resources_link_to_their_operations(
    document: dict[str, Any], path: str, method: str, status: str, names: set[str]
) -> None:
    # schemathesis warned: no links point to GET /v1/jobs/{job_id} and the like, so its
    # stateful phase could not reach them with ids that exist.
    links = document["paths"][path][method]["responses"][status]["links"]
    assert names <= links.keys()
    for link in links.values():
        pointer = link["operationRef"].removeprefix("#/paths/")
        target_path, target_method = pointer.rsplit("/", 1)
        target_path = target_path.replace("~1", "/").replace("~0", "~")
        operation = document["paths"][target_path][target_method]
        path_parameters = {p["name"] for p in operation["parameters"] if p["in"] == "path"}
        assert set(link["parameters"]) == path_parameters, link


# -- Durations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timeout", "valid"), [(1e-135, False), (1e-7, False), (0.0009, False), (0.001, True)]
)
@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/schedules"])
def test_a_timeout_too_short_to_store_is_refused_by_the_document_and_the_server(
    document: dict[str, Any], http: httpx.Client, path: str, timeout: float, valid: bool
) -> None:
    # schemathesis: a schedule with timeout_seconds 4.6e-135 (> 0, valid by the document) was
    # answered 503: the duration rounds to zero, which the table's CHECK refuses.
    rule = {"delay_seconds": 60} if path == "/v1/jobs" else {"cron": "@daily", "timezone": "UTC"}
    body = {"target": {"url": TARGET}, "timeout_seconds": timeout, **rule}
    schema = "JobIn" if path == "/v1/jobs" else "ScheduleIn"
    assert conforms(document, schema, body) is valid
    response = http.post(path, json=body)
    assert response.status_code == (201 if valid else 422), response.text


def test_an_empty_policy_is_refused_by_the_document_and_the_server(
    document: dict[str, Any], http: httpx.Client
) -> None:
    # schemathesis' coverage phase: policy "" was valid by the document (no minLength) and the
    # loader refused it (no gaps); null is the way to say "the default policy".
    assert not conforms(document, "SettingsIn", {"policy": ""})
    assert http.put("/v1/dunning/settings", json={"policy": ""}).status_code == 422


def test_every_listed_zone_and_country_is_one_the_layers_below_accept() -> None:
    # The document lists them (and the schemathesis run samples them): each must load.
    for name in TIME_ZONES:
        zone(name)
    for code in COUNTRIES:
        BusinessCalendar(country=code)


@pytest.mark.parametrize(
    ("anchor", "valid"),
    [
        ({"local": "2026-01-31T09:00", "end_of_month": "restrict"}, False),
        ({"local": "2026-01-31T09:00", "end_of_month": "restrict", "every": "year"}, False),
        ({"local": "2026-01-28T09:00", "end_of_month": "restrict"}, True),
        ({"local": "2026-01-31T09:00", "end_of_month": "restrict", "every": "week"}, True),
        ({"local": "2026-01-31T09:00"}, True),  # clamp, the default
    ],
)
def test_a_restricted_anchor_is_on_a_day_every_month_has_in_the_document_too(
    document: dict[str, Any], http: httpx.Client, anchor: dict[str, Any], valid: bool
) -> None:
    body = {"target": {"url": TARGET}, "anchor": {"timezone": "UTC", **anchor}}
    assert conforms(document, "ScheduleIn", body) is valid
    assert (http.post("/v1/schedules", json=body).status_code == 201) is valid
