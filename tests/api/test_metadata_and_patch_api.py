"""`metadata` on /v1 jobs and schedules (stored, returned, filtered with `metadata[key]=value`),
PATCH of a job that has not started and of a schedule, and a schedule's window, over real
HTTP on both backends."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import Api
from tests.api.test_jobs_api import TARGET, assert_problem, job_body, schedule_body
from tests.storage.test_store_contract import claim

ANCHOR = {"local": "2026-01-01T09:00:00", "timezone": "UTC"}


def test_metadata_is_returned_and_filters_the_job_list(api: Api) -> None:
    http = api.http(api.tenant())
    a = http.post("/v1/jobs", json=job_body(metadata={"order": "o_1", "region": "eu"})).json()
    b = http.post("/v1/jobs", json=job_body(metadata={"order": "o_2", "region": "eu"})).json()
    http.post("/v1/jobs", json=job_body())
    assert a["metadata"] == {"order": "o_1", "region": "eu"}
    assert http.get(f"/v1/jobs/{a['id']}").json()["metadata"] == a["metadata"]

    def ids(params: dict[str, str]) -> set[str]:
        response = http.get("/v1/jobs", params=params)
        assert response.status_code == 200, response.text
        return {j["id"] for j in response.json()["jobs"]}

    assert ids({"metadata[region]": "eu"}) == {a["id"], b["id"]}
    assert ids({"metadata[region]": "eu", "metadata[order]": "o_2"}) == {b["id"]}
    assert ids({"metadata[region]": "us"}) == set()
    assert len(ids({})) == 3


@pytest.mark.parametrize(
    ("metadata", "field", "said"),
    [
        ({f"k{i}": "v" for i in range(51)}, "metadata", "at most 50 keys"),
        ({"x" * 41: "v"}, "metadata", "1–40 characters"),
        ({"a b": "v"}, "metadata", "A–Z"),
        ({"k": "v" * 501}, "metadata.k", "500"),
        ({"k": 1}, "metadata.k", "string"),
    ],
)
def test_metadata_past_a_limit_is_a_422_naming_the_field_and_the_limit(
    api: Api, metadata: dict[str, Any], field: str, said: str
) -> None:
    http = api.http(api.tenant())
    for path, body in (("/v1/jobs", job_body), ("/v1/schedules", schedule_body)):
        response = http.post(path, json=body(metadata=metadata))
        problem = assert_problem(response, 422)
        fields = {e["field"] for e in problem["errors"]}
        assert any(f.startswith(field) for f in fields), problem
        assert said in response.text


def test_a_bad_metadata_filter_is_refused_and_other_brackets_stay_unknown(api: Api) -> None:
    http = api.http(api.tenant())
    assert_problem(http.get("/v1/jobs", params={"metadata[a b]": "x"}), 422, "metadata")
    problem = assert_problem(http.get("/v1/jobs", params={"meta[a]": "x"}), 400, "meta[a]")
    assert "metadata[…]" in problem["detail"]
    assert_problem(http.get("/v1/jobs", params={"metadata": "x"}), 400, "metadata")
    twice = http.get("/v1/jobs?metadata[a]=1&metadata[a]=2")
    assert_problem(twice, 400, "metadata[a]")
    # Only the lists take it.
    assert_problem(http.get("/v1/jobs/x/runs", params={"metadata[a]": "1"}), 400, "metadata[a]")


def test_the_document_states_the_filter_as_a_deep_object(api: Api) -> None:
    document = api.http().get("/openapi.json").json()
    for path in ("/v1/jobs", "/v1/schedules"):
        params = {p["name"]: p for p in document["paths"][path]["get"]["parameters"]}
        assert params["metadata"]["style"] == "deepObject"
    assert "patch" in document["paths"]["/v1/jobs/{job_id}"]
    assert "patch" in document["paths"]["/v1/schedules/{schedule_id}"]


# -- PATCH /v1/jobs/{id} -----------------------------------------------------------------------


def test_patching_a_scheduled_job_changes_only_what_is_given(api: Api) -> None:
    http = api.http(api.tenant())
    job = http.post(
        "/v1/jobs", json=job_body(name="n", metadata={"a": "1", "b": "2"}, timeout_seconds=10)
    ).json()
    run_at = "2030-01-01T09:00:00+01:00"
    response = http.patch(
        f"/v1/jobs/{job['id']}",
        json={"run_at": run_at, "metadata": {"a": None, "c": "3"}, "retry": {"max_attempts": 2}},
    )
    assert response.status_code == 200, response.text
    changed = response.json()
    assert changed["run_at"] == "2030-01-01T08:00:00Z"
    assert changed["metadata"] == {"b": "2", "c": "3"}
    assert changed["retry"]["max_attempts"] == 2
    assert changed["name"] == "n" and changed["timeout_seconds"] == 10  # untouched
    cleared = http.patch(
        f"/v1/jobs/{job['id']}", json={"name": None, "delay_seconds": 60, "target": None}
    )
    assert cleared.json()["name"] is None  # null removes a name; elsewhere it changes nothing
    assert cleared.json()["target"] == changed["target"]
    moved = datetime.fromisoformat(cleared.json()["run_at"])
    assert abs(moved - (SystemClock().now() + timedelta(seconds=60))) < timedelta(seconds=30)


def test_patching_a_claimed_job_is_a_409_naming_its_state(api: Api) -> None:
    tenant = api.tenant()
    http = api.http(tenant)
    job = http.post("/v1/jobs", json=job_body(delay_seconds=0)).json()
    (claimed,) = claim(api.store, now=SystemClock().now() + timedelta(seconds=1))
    assert claimed.id == job["id"]
    response = http.patch(f"/v1/jobs/{job['id']}", json={"name": "late"})
    problem = assert_problem(response, 409)
    assert "running" in problem["detail"] and job["id"] in problem["detail"]
    assert http.get(f"/v1/jobs/{job['id']}").json()["name"] is None
    assert_problem(http.patch("/v1/jobs/absent", json={"name": "x"}), 404)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"run_at": "2030-01-01T09:00:00Z", "delay_seconds": 5}, "run_at"),
        ({"target": {"url": "http://169.254.169.254/latest"}}, "target.url"),
        ({"name": "a@b"}, "name"),
        ({"unknown": 1}, "unknown"),
        ({"metadata": {"k": "v" * 501}}, "metadata.k"),
    ],
)
def test_a_bad_patch_is_refused_as_a_post_would_be(
    make_api: Any, body: dict[str, Any], field: str
) -> None:
    from recoup.jobs.ssrf import SsrfGuard

    api = make_api(ssrf=SsrfGuard())  # the default guard: no private or link-local address
    http = api.http(api.tenant())
    job = http.post("/v1/jobs", json=job_body(target={"url": "https://example.com/hook"}))
    assert job.status_code == 201, job.text
    response = http.patch(f"/v1/jobs/{job.json()['id']}", json=body)
    assert response.status_code in (400, 422), response.text
    assert field in response.text


# -- PATCH /v1/schedules/{id} and the window ---------------------------------------------------


def test_a_schedule_takes_metadata_and_a_window_and_filters_by_them(api: Api) -> None:
    http = api.http(api.tenant())
    now = SystemClock().now()
    start = (now + timedelta(days=2)).replace(microsecond=0)
    end = start + timedelta(days=3)
    body = schedule_body(
        name="w",
        metadata={"team": "billing"},
        start_at=start.isoformat(),
        end_at=end.isoformat(),
    )
    created = http.post("/v1/schedules", json=body)
    assert created.status_code == 201, created.text
    s = created.json()
    assert s["metadata"] == {"team": "billing"} and s["state"] == "active"
    assert datetime.fromisoformat(s["next_fire_at"]) >= start
    upcoming = http.get(f"/v1/schedules/{s['id']}/upcoming", params={"count": 10}).json()
    assert len(upcoming["upcoming"]) == 3  # one a day inside a three-day window
    assert all(start <= datetime.fromisoformat(at) <= end for at in upcoming["upcoming"])
    http.post("/v1/schedules", json=schedule_body(name="other"))
    listed = http.get("/v1/schedules", params={"metadata[team]": "billing"}).json()
    assert [x["name"] for x in listed["schedules"]] == ["w"]
    reversed_window = schedule_body(name="r", start_at=end.isoformat(), end_at=start.isoformat())
    assert_problem(http.post("/v1/schedules", json=reversed_window), 422, "end_at")


def test_patching_a_schedule_changes_its_rule_zone_and_state(api: Api) -> None:
    http = api.http(api.tenant())
    s = http.post("/v1/schedules", json=schedule_body(metadata={"a": "1"})).json()
    zoned = http.patch(f"/v1/schedules/{s['id']}", json={"timezone": "Europe/London"})
    assert zoned.status_code == 200, zoned.text
    assert zoned.json()["timezone"] == "Europe/London" and zoned.json()["cron"] == "30 2 * * *"
    recron = http.patch(f"/v1/schedules/{s['id']}", json={"cron": "0 9 * * *"}).json()
    assert recron["cron"] == "0 9 * * *" and recron["timezone"] == "Europe/London"
    merged = http.patch(f"/v1/schedules/{s['id']}", json={"metadata": {"a": None, "b": "2"}})
    assert merged.json()["metadata"] == {"b": "2"}
    ended = http.patch(f"/v1/schedules/{s['id']}", json={"end_at": "2020-01-01T00:00:00Z"})
    assert ended.status_code == 200, ended.text
    assert ended.json()["state"] == "ended" and ended.json()["next_fire_at"] is None
    listed = http.get("/v1/schedules", params={"state": "ended"}).json()["schedules"]
    assert [x["id"] for x in listed] == [s["id"]]
    assert http.get("/v1/schedules", params={"state": "active"}).json()["schedules"] == []
    reopened = http.patch(f"/v1/schedules/{s['id']}", json={"end_at": None}).json()
    assert reopened["state"] == "active" and reopened["end_at"] is None
    paused = http.patch(f"/v1/schedules/{s['id']}", json={"paused": True}).json()
    assert paused["state"] == "paused"
    kept = http.patch(f"/v1/schedules/{s['id']}", json={"paused": None, "name": None}).json()
    assert kept["state"] == "paused" and kept["name"] == s["name"]  # null: left as it is


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"timezone": "Mars/Base"}, "timezone"),
        (
            {"cron": "0 9 * * *", "anchor": {"local": "2026-01-01T09:00:00", "timezone": "UTC"}},
            "cron",
        ),
        ({"name": "a@b"}, "name"),
        ({"target": {"url": "ftp://example.com/"}}, "target.url"),
        ({"start_at": "2031-01-01T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"}, "end_at"),
    ],
)
def test_a_bad_schedule_patch_names_the_field(api: Api, body: dict[str, Any], field: str) -> None:
    http = api.http(api.tenant())
    s = http.post("/v1/schedules", json=schedule_body()).json()
    response = http.patch(f"/v1/schedules/{s['id']}", json=body)
    assert response.status_code in (400, 422), response.text
    assert field in {e["field"] for e in response.json()["errors"]}, response.text


def test_patching_a_deleted_or_absent_schedule_is_a_404(api: Api) -> None:
    http = api.http(api.tenant())
    s = http.post("/v1/schedules", json=schedule_body()).json()
    http.delete(f"/v1/schedules/{s['id']}")
    assert_problem(http.patch(f"/v1/schedules/{s['id']}", json={"paused": True}), 404)
    assert_problem(http.patch("/v1/schedules/absent", json={"paused": True}), 404)


def test_the_target_of_a_patched_job_is_checked_against_the_receiver(api: Api) -> None:
    # A job's receiver moves to another loopback URL: allowed by this API's SSRF settings.
    http = api.http(api.tenant())
    job = http.post("/v1/jobs", json=job_body()).json()
    moved = http.patch(f"/v1/jobs/{job['id']}", json={"target": {"url": TARGET + "/v2"}})
    assert moved.status_code == 200, moved.text
    assert moved.json()["target"]["url"] == TARGET + "/v2"


def test_a_new_zone_alone_moves_an_anchor_schedule_and_a_new_cron_keeps_its_zone(
    api: Api,
) -> None:
    http = api.http(api.tenant())
    s = http.post(
        "/v1/schedules", json={"anchor": ANCHOR, "target": {"url": TARGET}, "name": "a"}
    ).json()
    moved = http.patch(f"/v1/schedules/{s['id']}", json={"timezone": "Asia/Kolkata"}).json()
    assert moved["anchor"]["timezone"] == moved["timezone"] == "Asia/Kolkata"
    assert moved["anchor"]["local"] == s["anchor"]["local"]
    cron = http.patch(f"/v1/schedules/{s['id']}", json={"cron": "0 9 * * *"}).json()
    assert cron["cron"] == "0 9 * * *" and cron["timezone"] == "Asia/Kolkata"
    assert cron["anchor"] is None


def test_a_new_target_keeps_the_jobs_callbacks(api: Api) -> None:
    http = api.http(api.tenant())
    job = http.post(
        "/v1/jobs", json=job_body(callback=TARGET + "/ok", failure_callback=TARGET + "/failed")
    ).json()
    moved = http.patch(f"/v1/jobs/{job['id']}", json={"target": {"url": TARGET + "/v2"}})
    assert moved.status_code == 200, moved.text
    assert moved.json()["callback"] == TARGET + "/ok"
    assert moved.json()["failure_callback"] == TARGET + "/failed"
