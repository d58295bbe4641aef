"""The /v1 listings over real HTTP, on both backends: every list pages with `limit` and
`cursor`, filters as documented, and a query parameter an operation does not declare is a
400 naming it (never a silent listing of everything)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from recoup.jobs.model import RunOutcome
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import Api
from tests.api.test_jobs_api import assert_problem, job_body, schedule_body
from tests.storage.test_store_contract import claim, report

# Unknown parameters


@pytest.mark.parametrize(
    ("method", "path", "unknown"),
    [
        ("GET", "/v1/jobs", "nme"),  # a typo of `name` once listed every job
        ("GET", "/v1/jobs/j-1/runs", "state"),  # a filter of another listing
        ("GET", "/v1/schedules", "paused"),  # spelled `state=paused` here
        ("GET", "/v1/schedules/s-1/upcoming", "limit"),  # it takes `count`
        ("GET", "/v1/dunning/invoices", "customer"),
        ("GET", "/v1/dunning/settings", "verbose"),
        ("POST", "/v1/jobs/cancel", "dry_run"),  # every operation, not only the lists
    ],
)
def test_an_unknown_query_parameter_is_a_400_naming_it_and_what_is_allowed(
    api: Api, method: str, path: str, unknown: str
) -> None:
    http = api.http(api.tenant())
    response = http.request(method, path, params={unknown: "x"}, json={"name": "n"})
    problem = assert_problem(response, 400, unknown)
    assert problem["type"].endswith("unknown-query-parameter")
    assert unknown in problem["detail"] and path.split("/")[2] in problem["detail"]
    (error,) = problem["errors"]
    assert error["value"] == "x" and "accepts:" in error["message"]


def test_the_refusal_lists_every_unknown_parameter_and_the_allowed_ones(api: Api) -> None:
    http = api.http(api.tenant())
    response = http.get("/v1/jobs", params={"zeta": "1", "alpha": "2", "limit": "5"})
    problem = assert_problem(response, 400, "alpha", "zeta")
    assert "alpha, zeta" in problem["detail"]
    for allowed in ("state", "name", "name_prefix", "group", "limit", "cursor"):
        assert allowed in problem["detail"]


def test_an_unauthenticated_request_gets_its_401_before_the_400(api: Api) -> None:
    response = api.http().get("/v1/jobs", params={"nme": "x"})
    assert_problem(response, 401)


def test_declared_parameters_are_accepted(api: Api) -> None:
    http = api.http(api.tenant())
    params = {"state": "scheduled", "name": "n", "name_prefix": "n", "group": "g", "limit": 5}
    assert http.get("/v1/jobs", params=params).status_code == 200
    params = {"state": "paused", "name": "n", "limit": 5, "cursor": "m"}
    assert http.get("/v1/schedules", params=params).status_code == 200


# Jobs


def test_jobs_filter_by_exact_name(api: Api) -> None:
    http = api.http(api.tenant())
    ids = {}
    for name in ("invoice-1", "invoice-10", "invoice-2"):
        ids[name] = http.post("/v1/jobs", json=job_body(name=name)).json()["id"]
    listed = http.get("/v1/jobs", params={"name": "invoice-1"}).json()
    assert [j["id"] for j in listed["jobs"]] == [ids["invoice-1"]]
    assert listed["next_cursor"] is None
    prefixed = http.get("/v1/jobs", params={"name_prefix": "invoice-1"}).json()
    assert {j["id"] for j in prefixed["jobs"]} == {ids["invoice-1"], ids["invoice-10"]}


def test_a_jobs_run_log_pages(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    job = http.post("/v1/jobs", json=job_body(retry={"max_attempts": 5})).json()
    now = SystemClock().now() + timedelta(hours=2)  # past its run_at
    for outcome in (RunOutcome.RETRY, RunOutcome.RETRY, RunOutcome.SUCCEEDED):
        (claimed,) = claim(api.store, now=now)
        api.store.complete_many([report(claimed, outcome, at=now, retry_at=now)], now=now)
    path = f"/v1/jobs/{job['id']}/runs"
    first = http.get(path, params={"limit": 2}).json()
    assert [r["attempt"] for r in first["runs"]] == [1, 2]
    rest = http.get(path, params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [r["attempt"] for r in rest["runs"]] == [3] and rest["next_cursor"] is None
    assert len(http.get(path).json()["runs"]) == 3  # 50 by default
    assert_problem(http.get(path, params={"cursor": "1:x"}), 422, "cursor")
    assert_problem(http.get(path, params={"limit": 0}), 422, "limit")
    assert_problem(http.get("/v1/jobs/nope/runs"), 404)


# Schedules


def test_schedules_page_by_name_and_filter_by_state_and_name(api: Api) -> None:
    http = api.http(api.tenant())
    made: dict[str, Any] = {}
    for name in ("c", "a", "d", "b"):
        made[name] = http.post("/v1/schedules", json=schedule_body(name=name)).json()
    http.post(f"/v1/schedules/{made['d']['id']}/pause")

    def names(**params: Any) -> tuple[list[str], str | None]:
        page = http.get("/v1/schedules", params=params).json()
        return [s["name"] for s in page["schedules"]], page["next_cursor"]

    assert names(limit=2) == (["a", "b"], "b")  # `limit` is honoured
    assert names(limit=2, cursor="b") == (["c", "d"], None)
    assert names(state="paused") == (["d"], None)
    assert names(state="active") == (["a", "b", "c"], None)
    assert names(name="b") == (["b"], None)
    assert_problem(http.get("/v1/schedules", params={"state": "gone"}), 422, "state")
    assert_problem(http.get("/v1/schedules", params={"limit": 1001}), 422, "limit")
