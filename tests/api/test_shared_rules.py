"""Rules the HTTP API shares with the jobs layer, defined once below it: the HTTP methods a
target may use (`recoup.jobs.model.HTTP_METHODS`) and the largest page of a list
(`recoup.jobs.store.MAX_PAGE`). Each test checks that both layers answer alike."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from recoup.errors import InvalidInput
from recoup.jobs.model import BODILESS_METHODS, HTTP_METHODS, HttpTarget
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import MAX_PAGE
from recoup.timekeeping.clock import SystemClock
from recoup.wire.schemas import TargetIn
from tests.api.conftest import TARGET, Api

PROBLEM = "application/problem+json"


def python_api(api: Api) -> Scheduler:
    return Scheduler(api.store, clock=SystemClock(), ssrf=SsrfGuard(allow_private=True))


def refused_field(response: Any) -> set[str]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    return {error["field"] for error in response.json()["errors"]}


def test_the_api_schema_is_the_jobs_layers_list_of_methods(api: Api) -> None:
    assert get_args(TargetIn.model_fields["method"].annotation) == HTTP_METHODS
    schema = api.http().get("/openapi.json").json()["components"]["schemas"]["TargetIn"]
    assert schema["properties"]["method"]["enum"] == list(HTTP_METHODS)
    # All seven a webhook or an API call can need; CONNECT and TRACE are never a job's work.
    assert set(HTTP_METHODS) == {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}


def test_every_method_is_accepted_by_both_layers_and_none_other(api: Api) -> None:
    http = api.http(api.tenant())
    scheduler = python_api(api)
    for method in HTTP_METHODS:
        target = {"url": TARGET, "method": method}
        created = http.post("/v1/jobs", json={"delay_seconds": 60, "target": target})
        assert created.status_code == 201, (method, created.text)
        assert created.json()["target"]["method"] == method
        scheduler.enqueue(HttpTarget(url=TARGET, method=method))
    for method in ("TRACE", "CONNECT", "BREW"):
        target = {"url": TARGET, "method": method}
        refused = http.post("/v1/jobs", json={"delay_seconds": 60, "target": target})
        assert "target.method" in refused_field(refused)
        with pytest.raises(InvalidInput) as python_refusal:
            scheduler.enqueue(HttpTarget(url=TARGET, method=method))
        assert python_refusal.value.field == "target.method"


@pytest.mark.parametrize("method", sorted(BODILESS_METHODS))
def test_a_head_or_options_target_with_a_body_is_refused_by_both_layers(
    api: Api, method: str
) -> None:
    http = api.http(api.tenant())
    target = {"url": TARGET, "method": method, "body": {"a": 1}}
    job = http.post("/v1/jobs", json={"delay_seconds": 60, "target": target})
    assert "target.body" in refused_field(job)
    schedule = {"cron": "0 * * * *", "timezone": "UTC", "target": target}
    assert "target.body" in refused_field(http.post("/v1/schedules", json=schedule))

    scheduler = python_api(api)
    with pytest.raises(InvalidInput) as with_body:
        scheduler.enqueue(HttpTarget(url=TARGET, method=method.lower(), body="x"))
    assert with_body.value.field == "target.body"
    # A payload is sent as the body when the target has none: refused alike.
    with pytest.raises(InvalidInput) as with_payload:
        scheduler.enqueue(HttpTarget(url=TARGET, method=method), payload={"a": 1})
    assert with_payload.value.field == "payload"


def test_a_page_may_hold_max_page_jobs_on_both_layers_and_no_more(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    assert http.get("/v1/jobs", params={"limit": MAX_PAGE}).status_code == 200
    assert "limit" in refused_field(http.get("/v1/jobs", params={"limit": MAX_PAGE + 1}))
    invoices = http.get("/v1/dunning/invoices", params={"limit": MAX_PAGE + 1})
    assert "limit" in refused_field(invoices)

    scheduler = python_api(api)
    assert scheduler.list_jobs(tenant=caller.tenant, limit=MAX_PAGE).jobs == []
    with pytest.raises(InvalidInput) as refused:
        scheduler.list_jobs(tenant=caller.tenant, limit=MAX_PAGE + 1)
    assert refused.value.field == "limit"

    paths = http.get("/openapi.json").json()["paths"]
    for path in ("/v1/jobs", "/v1/dunning/invoices"):
        (limit,) = (p for p in paths[path]["get"]["parameters"] if p["name"] == "limit")
        assert limit["schema"]["maximum"] == MAX_PAGE, path
