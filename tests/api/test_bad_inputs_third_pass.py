"""The reproductions of issue 24's bad inputs over real HTTP, on both backends: each is a 4xx
problem naming the field (never a 503 the client would retry, never a driver's text), and the
same request gets the same answer on SQLite and PostgreSQL (`EXPECTED` pins the status both
must give)."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from recoup.dunning.invoice import INVOICE_ID_RULE
from tests.api.conftest import TARGET, Api
from tests.api.test_jobs_api import assert_problem, job_body, schedule_body


def raw_post(http: Any, path: str, text: str) -> Any:
    return http.post(path, content=text, headers={"content-type": "application/json"})


# 1. Non-finite numbers: Python's JSON reader takes NaN, Infinity and 1e400 (→ inf).
@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/schedules"])
def test_a_non_finite_number_in_a_target_body_is_a_422_naming_target_body(
    api: Api, number: str, path: str
) -> None:
    http = api.http(api.tenant())
    base = job_body() if path == "/v1/jobs" else schedule_body()
    text = (
        json.dumps(base)[:-1] + f', "target": {{"url": "{TARGET}", "body": {{"x": [{number}]}}}}}}'
    )
    response = raw_post(http, path, text)
    problem = assert_problem(response, 422, "target.body")
    assert "finite" in problem["errors"][0]["message"]
    assert "Token" not in response.text and "DETAIL" not in response.text  # no driver's text
    assert http.get(path).json()[path.rsplit("/", 1)[1]] == []


def test_a_finite_float_in_a_target_body_is_kept(api: Api) -> None:
    http = api.http(api.tenant())
    text = json.dumps(job_body(target={"url": TARGET, "body": {"x": -2.5e-3}}))
    created = raw_post(http, "/v1/jobs", text)
    assert created.status_code == 201, created.text
    assert created.json()["target"]["body"] == {"x": -2.5e-3}


# 2. Invoice ids: one documented alphabet, so every id accepted can be reached again.
FAILURE = {
    "customer_id": "cus_1",
    "amount": 1999,
    "currency": "usd",
    "failed_at": "2026-03-02T10:00:00Z",
    "timezone": "UTC",
    "decline_code": "insufficient_funds",
    "charge_url": TARGET,
}


@pytest.mark.parametrize(
    "invoice_id",
    [
        "2026/0042",  # a common invoice number: no route could name it again
        "<b>in_1</b>",  # markup
        "in 1",
        "..",
        "in@1",  # would put '@' in the job names
        "in\x1b[2J",
    ],
)
def test_an_invoice_id_outside_the_alphabet_is_a_422_naming_invoice_id(
    api: Api, invoice_id: str
) -> None:
    http = api.http(api.tenant())
    response = http.post("/v1/dunning/failures", json={**FAILURE, "invoice_id": invoice_id})
    problem = assert_problem(response, 422, "invoice_id")
    assert any(INVOICE_ID_RULE in e["message"] for e in problem["errors"]), problem
    assert http.get("/v1/dunning/invoices").json()["invoices"] == []


def test_every_invoice_id_of_the_alphabet_is_reached_again_by_every_route(api: Api) -> None:
    http = api.http(api.tenant())
    invoice_id = "2026-0042.a_b~C"
    created = http.post("/v1/dunning/failures", json={**FAILURE, "invoice_id": invoice_id})
    assert created.status_code in (200, 201), created.text
    assert http.get(f"/v1/dunning/invoices/{invoice_id}").status_code == 200
    paid = http.post(f"/v1/dunning/invoices/{invoice_id}/paid")
    assert paid.status_code == 200, paid.text
    assert paid.json()["state"] == "recovered"


# 3. Strict booleans in PATCH /v1/schedules/{id}, as `allow_past` is.
@pytest.mark.parametrize("paused", ["true", "yes", "on", 1, 0, "false"])
def test_paused_takes_only_a_json_boolean(api: Api, paused: object) -> None:
    http = api.http(api.tenant())
    schedule = http.post("/v1/schedules", json=schedule_body()).json()
    response = http.patch(f"/v1/schedules/{schedule['id']}", json={"paused": paused})
    assert_problem(response, 422, "paused")
    assert http.get(f"/v1/schedules/{schedule['id']}").json()["paused"] is False


def test_paused_true_pauses(api: Api) -> None:
    http = api.http(api.tenant())
    schedule = http.post("/v1/schedules", json=schedule_body()).json()
    response = http.patch(f"/v1/schedules/{schedule['id']}", json={"paused": True})
    assert response.status_code == 200 and response.json()["paused"] is True


# 4. Control characters in names (printed by `recoup jobs list/show`: see tests/cli).
@pytest.mark.parametrize("name", ["a\x1b[31mb", "tab\there", "bell\x07", "c1\x9b2J", "del\x7f"])
@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/schedules"])
def test_a_control_character_in_a_name_is_a_422_naming_name(api: Api, name: str, path: str) -> None:
    http = api.http(api.tenant())
    base = job_body if path == "/v1/jobs" else schedule_body
    problem = assert_problem(http.post(path, json=base(name=name)), 422, "name")
    assert "control" in problem["errors"][0]["message"]


def test_a_control_character_in_a_group_is_a_422_naming_group(api: Api) -> None:
    http = api.http(api.tenant())
    assert_problem(http.post("/v1/jobs", json=job_body(group="g\x1b]0;x\x07")), 422, "group")


# 5. A control byte in Idempotency-Key: the HTTP parser refuses it, in problem+json.
def test_a_control_byte_in_a_header_gets_a_problem_json_400(api: Api) -> None:
    caller = api.tenant()
    host, port = api.url.removeprefix("http://").split(":")
    body = json.dumps(job_body()).encode()
    request = (
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + caller.token.encode()
        + b"\r\nIdempotency-Key: a\x01b\r\nContent-Type: application/json\r\n"
        + b"Content-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"content-type: application/problem+json" in head.lower()
    problem = json.loads(payload)
    assert problem["status"] == 400 and problem["type"].startswith("urn:recoup:problem:")
    assert api.http(caller).get("/v1/jobs").json()["jobs"] == []


# 6. Header names and values in `target.headers` are bounded.
@pytest.mark.parametrize(
    "headers",
    [{"X-A": "v" * 100_000}, {"X-" + "a" * 100_000: "v"}, {"X-A": "v" * 8193}],
)
def test_an_oversized_target_header_is_a_422_naming_target_headers(
    api: Api, headers: dict[str, str]
) -> None:
    http = api.http(api.tenant())
    response = http.post("/v1/jobs", json=job_body(target={"url": TARGET, "headers": headers}))
    problem = assert_problem(response, 422)
    assert all(e["field"].startswith("target.headers") for e in problem["errors"]), problem
    assert len(response.text) < 5_000  # the value is not echoed whole


def test_a_header_value_at_the_bound_is_kept(api: Api) -> None:
    http = api.http(api.tenant())
    headers = {"X-A": "v" * 8192}
    response = http.post("/v1/jobs", json=job_body(target={"url": TARGET, "headers": headers}))
    assert response.status_code == 201, response.text


# 7. A cron step past its field's count of values.
@pytest.mark.parametrize(
    "cron", ["*/99999999999999999999 * * * *", "*/0 * * * *", "0 */25 * * *", "0 0 * */13 *"]
)
def test_a_cron_step_out_of_its_field_is_a_422_naming_cron(api: Api, cron: str) -> None:
    http = api.http(api.tenant())
    problem = assert_problem(http.post("/v1/schedules", json=schedule_body(cron=cron)), 422, "cron")
    assert "step" in problem["errors"][0]["message"]


# 2, at the Stripe intake: an invoice id outside the alphabet (markup) is ignored, saying why.
@pytest.mark.parametrize("invoice_id", ["in_<script>1</script>", "2026/0042"])
def test_the_stripe_intake_ignores_an_invoice_id_outside_the_alphabet(
    api: Api, invoice_id: str
) -> None:
    from tests.api.test_stripe_intake import FAILED, make_intake
    from tests.recovery.stripe_payloads import event, invoice, payment_intent

    intake = make_intake(api)
    answer = intake.send(event(FAILED, invoice(invoice_id, intent=payment_intent())))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["outcome"] == "ignored" and body["invoices"] == []
    assert "id" in body["detail"]
    assert intake.http.get("/v1/dunning/invoices").json()["invoices"] == []
