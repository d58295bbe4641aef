"""Job groups over HTTP and through the Python client, on both backends: `group` in the job
body and its JSON, `GET /v1/jobs?group=` and `POST /v1/jobs/cancel {"group": …}`, all by exact
equality."""

from __future__ import annotations

from typing import Any

import httpx

from recoup.client import Client
from tests.api.conftest import TARGET, Api

GROUP = "dunning:inv_1"


def create(http: httpx.Client, **fields: Any) -> dict[str, Any]:
    response = http.post(
        "/v1/jobs", json={"delay_seconds": 3600, "target": {"url": TARGET}, **fields}
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def test_jobs_are_created_listed_and_cancelled_by_group(api: Api) -> None:
    http = api.http(api.tenant())
    first = create(http, group=GROUP)
    second = create(http, group=GROUP)
    create(http, group=GROUP + "-x")  # longer, same start: never matched
    ungrouped = create(http)
    assert first["group"] == GROUP and ungrouped["group"] is None
    assert http.get(f"/v1/jobs/{first['id']}").json()["group"] == GROUP

    listed = http.get("/v1/jobs", params={"group": GROUP}).json()
    assert [j["id"] for j in listed["jobs"]] == [second["id"], first["id"]]
    assert http.get("/v1/jobs", params={"group": "dunning:inv_"}).json()["jobs"] == []

    cancelled = http.post("/v1/jobs/cancel", json={"group": GROUP})
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json() == {"cancelled": 2}
    states = {j["state"] for j in http.get("/v1/jobs", params={"group": GROUP}).json()["jobs"]}
    assert states == {"cancelled"}
    cousins = http.get("/v1/jobs", params={"group": GROUP + "-x"}).json()["jobs"]
    assert [j["state"] for j in cousins] == ["scheduled"]


def test_a_group_is_cancelled_only_within_its_tenant(api: Api) -> None:
    owner = api.http(api.tenant())
    intruder = api.http(api.tenant())
    create(owner, group=GROUP)
    assert intruder.post("/v1/jobs/cancel", json={"group": GROUP}).json() == {"cancelled": 0}
    assert intruder.get("/v1/jobs", params={"group": GROUP}).json()["jobs"] == []
    assert owner.post("/v1/jobs/cancel", json={"group": GROUP}).json() == {"cancelled": 1}


def test_group_inputs_are_validated_naming_the_field(api: Api) -> None:
    http = api.http(api.tenant())
    for bad in ("", "g" * 201):
        response = http.post(
            "/v1/jobs", json={"delay_seconds": 1, "target": {"url": TARGET}, "group": bad}
        )
        assert response.status_code == 422
        assert {e["field"] for e in response.json()["errors"]} == {"group"}
    assert http.get("/v1/jobs", params={"group": ""}).status_code == 422
    both = http.post("/v1/jobs/cancel", json={"name": "a", "group": GROUP})
    assert both.status_code == 422
    assert {"name", "group"} <= {e["field"] for e in both.json()["errors"]}


def test_the_openapi_document_describes_the_group(api: Api) -> None:
    spec = api.http().get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for model in ("JobIn", "JobOut", "CancelIn"):
        assert "group" in schemas[model]["properties"], model
    parameters = spec["paths"]["/v1/jobs"]["get"]["parameters"]
    assert "group" in {p["name"] for p in parameters}


def test_the_client_creates_lists_and_cancels_by_group(api: Api) -> None:
    caller = api.tenant()
    with Client(api.url, caller.token) as recoup:
        job = recoup.create_job(TARGET, delay_seconds=3600, group=GROUP)
        recoup.create_job(TARGET, delay_seconds=3600, group="other")
        assert job.group == GROUP
        assert [j.id for j in recoup.list_jobs(group=GROUP).jobs] == [job.id]
        assert [j.id for j in recoup.iter_jobs(group=GROUP, page_size=1)] == [job.id]
        assert recoup.cancel_jobs(group=GROUP) == 1
        assert recoup.get_job(job.id).state == "cancelled"
