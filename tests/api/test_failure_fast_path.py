"""`POST /v1/dunning/failures`'s fast path (`recoup.api.routes.dunning.fast_report_failure`):
the declared route's answers, without a read of the token per request, and a revoked token
refused by the next request."""

from __future__ import annotations

import httpx
import pytest

from recoup.api.fast_route import FastPathRoute
from recoup.api.routes import dunning as dunning_routes
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import Api
from tests.api.fast_path_probes import on_the_loop, token_reads
from tests.api.test_dunning_api import FAILURE


def test_failures_and_outcomes_are_the_dunning_routers_fast_routes() -> None:
    fast = [r for r in dunning_routes.router.routes if isinstance(r, FastPathRoute)]
    assert [route.path for route in fast] == [
        "/v1/dunning/failures",
        "/v1/dunning/invoices/{invoice_id}/attempts/{attempt}/outcome",
    ]


def test_a_failure_with_a_cached_token_is_answered_and_replayed_without_reading_it(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    http = api.http(api.tenant())
    reads = token_reads(api, monkeypatch)
    first = http.post("/v1/dunning/failures", json={**FAILURE, "invoice_id": "inv_f0"})
    assert first.status_code == 201, first.text
    assert len(reads) == 1  # the first request fills the cache
    headers = {"Idempotency-Key": "fail-1"}
    created = http.post(
        "/v1/dunning/failures", json={**FAILURE, "invoice_id": "inv_f1"}, headers=headers
    )
    assert created.status_code == 201, created.text
    again = http.post(
        "/v1/dunning/failures", json={**FAILURE, "invoice_id": "inv_f1"}, headers=headers
    )
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.content == created.content
    same = http.post("/v1/dunning/failures", json={**FAILURE, "invoice_id": "inv_f1"})
    assert same.status_code == 200  # the same failure again: unchanged
    assert same.json()["invoice_id"] == "inv_f1"
    assert len(reads) == 1


def test_what_the_failure_fast_path_declines_gets_the_declared_routes_problems(
    api: Api,
) -> None:
    caller = api.tenant()
    http = api.http(caller)
    assert http.post("/v1/dunning/failures", json=FAILURE).status_code == 201  # cached now
    invalid = http.post("/v1/dunning/failures", json={**FAILURE, "amount": 0})
    assert invalid.status_code == 422
    assert invalid.headers["content-type"] == "application/problem+json"
    assert any(error["field"] == "amount" for error in invalid.json()["errors"])
    mismatch = http.post(
        "/v1/dunning/failures",
        json={**FAILURE, "invoice_id": "inv_m"},
        headers={"Idempotency-Key": "k"},
    )
    assert mismatch.status_code == 201
    reused = http.post(
        "/v1/dunning/failures",
        json={**FAILURE, "invoice_id": "inv_n"},
        headers={"Idempotency-Key": "k"},
    )
    assert reused.status_code == 422
    assert reused.json()["type"].endswith("idempotency-key-reused")


def test_a_revoked_token_is_refused_by_the_next_failure_report(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    assert http.post("/v1/dunning/failures", json=FAILURE).status_code == 201  # cached now
    tables = api.tables
    (token,) = tables.list_tokens(caller.tenant)
    assert tables.revoke_token(token.id, now=SystemClock().now()) is not None
    refused = http.post("/v1/dunning/failures", json={**FAILURE, "invoice_id": "inv_r"})
    assert refused.status_code == 401
    assert refused.headers["content-type"] == "application/problem+json"
    stranger = httpx.post(
        f"{api.url}/v1/dunning/failures", json=FAILURE, headers={"Authorization": "Bearer rcp_x"}
    )
    assert stranger.status_code == 401


def test_a_failure_with_a_literal_charge_url_is_reported_in_a_thread_never_on_the_loop(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    http = api.http(api.tenant())
    assert http.post("/v1/dunning/failures", json=FAILURE).status_code == 201  # cached now
    seen = on_the_loop(api.app.state.api.dunning, "report_failure", monkeypatch)
    body = {**FAILURE, "invoice_id": "inv_l", "charge_url": "http://127.0.0.1:9/charge"}
    assert http.post("/v1/dunning/failures", json=body).status_code == 201
    assert seen == [False]


def test_an_outcome_with_a_cached_token_is_answered_in_a_thread_and_replayed(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    http = api.http(api.tenant())
    assert http.post("/v1/dunning/failures", json=FAILURE).status_code == 201  # cached now
    reads = token_reads(api, monkeypatch)
    seen = on_the_loop(api.app.state.api.dunning, "report_outcome", monkeypatch)
    url = f"/v1/dunning/invoices/{FAILURE['invoice_id']}/attempts/1/outcome"
    headers = {"Idempotency-Key": "out-1"}
    body = {"outcome": "failed", "decline_code": "insufficient_funds"}
    reported = http.post(url, json=body, headers=headers)
    assert reported.status_code == 200, reported.text
    again = http.post(url, json=body, headers=headers)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.content == reported.content
    assert reads == []
    assert seen == [False]  # the replay is the stored answer: the service is not called again


@pytest.mark.parametrize(
    ("attempt", "status"),
    [
        ("01", 200),  # a leading zero: the declared route reads it as 1
        ("0", 422),  # below the first attempt
        ("1001", 422),  # past the last
        ("x", 422),
    ],
)
def test_an_outcomes_path_the_fast_path_declines_is_answered_by_the_declared_route(
    api: Api, attempt: str, status: int
) -> None:
    http = api.http(api.tenant())
    assert http.post("/v1/dunning/failures", json=FAILURE).status_code == 201  # cached now
    url = f"/v1/dunning/invoices/{FAILURE['invoice_id']}/attempts/{attempt}/outcome"
    answer = http.post(url, json={"outcome": "failed"})
    assert answer.status_code == status, answer.text
    if status == 422:
        assert answer.headers["content-type"] == "application/problem+json"
        assert any(error["field"] == "attempt" for error in answer.json()["errors"])


def test_a_revoked_token_is_refused_by_the_next_outcome(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    assert http.post("/v1/dunning/failures", json=FAILURE).status_code == 201  # cached now
    (token,) = api.tables.list_tokens(caller.tenant)
    assert api.tables.revoke_token(token.id, now=SystemClock().now()) is not None
    url = f"/v1/dunning/invoices/{FAILURE['invoice_id']}/attempts/1/outcome"
    refused = http.post(url, json={"outcome": "failed"})
    assert refused.status_code == 401
    assert refused.headers["content-type"] == "application/problem+json"
