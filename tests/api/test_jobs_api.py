"""The /v1 contract over real HTTP, on both backends: jobs, schedules, idempotency keys,
authentication, tenant isolation, problem+json errors, limits and operations endpoints."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from recoup.errors import StorageError
from recoup.idempotency import Mismatch, New
from recoup.tenancy import issue_token
from tests.api.conftest import TARGET, Api

PROBLEM = "application/problem+json"


def job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"delay_seconds": 3600, "target": {"url": TARGET}}
    body.update(overrides)
    return body


def schedule_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "cron": "30 2 * * *",
        "timezone": "America/New_York",
        "target": {"url": TARGET},
    }
    body.update(overrides)
    return body


def assert_problem(response: httpx.Response, status: int, *fields: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    problem: dict[str, Any] = response.json()
    assert problem["status"] == status
    assert {"type", "title", "status", "detail", "errors"} <= problem.keys()
    assert "Traceback" not in response.text
    named = {e["field"] for e in problem["errors"]}
    assert set(fields) <= named, (fields, problem)
    return problem


# Jobs


def test_a_job_is_created_read_listed_and_cancelled(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    run_at = datetime.now(UTC) + timedelta(hours=1)
    created = http.post(
        "/v1/jobs",
        json={
            "run_at": run_at.isoformat(),
            "target": {"url": TARGET, "method": "PUT", "headers": {"X-A": "1"}, "body": "raw"},
            "name": "invoice-42",
            "retry": {"max_attempts": 3, "min_backoff_seconds": 2, "max_backoff_seconds": 60},
            "timeout_seconds": 5,
        },
    )
    assert created.status_code == 201, created.text
    job = created.json()
    assert job["name"] == "invoice-42"
    assert job["state"] == "scheduled"
    assert datetime.fromisoformat(job["run_at"]) == run_at
    assert job["target"]["method"] == "PUT"
    assert job["retry"] == {"max_attempts": 3, "min_backoff_seconds": 2, "max_backoff_seconds": 60}
    assert job["timeout_seconds"] == 5

    assert http.get(f"/v1/jobs/{job['id']}").json() == job
    listed = http.get("/v1/jobs", params={"state": "scheduled", "name_prefix": "invoice-"}).json()
    assert [j["id"] for j in listed["jobs"]] == [job["id"]]
    assert http.get(f"/v1/jobs/{job['id']}/runs").json() == {"runs": [], "next_cursor": None}

    cancelled = http.delete(f"/v1/jobs/{job['id']}")
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "cancelled"
    again = http.delete(f"/v1/jobs/{job['id']}")  # idempotent
    assert again.status_code == 200 and again.json()["state"] == "cancelled"


def test_delay_seconds_counts_from_now(api: Api) -> None:
    http = api.http(api.tenant())
    before = datetime.now(UTC)
    job = http.post("/v1/jobs", json=job_body(delay_seconds=60)).json()
    run_at = datetime.fromisoformat(job["run_at"])
    assert before + timedelta(seconds=60) <= run_at <= datetime.now(UTC) + timedelta(seconds=60)


def test_a_live_name_clash_is_409(api: Api) -> None:
    http = api.http(api.tenant())
    assert http.post("/v1/jobs", json=job_body(name="n")).status_code == 201
    assert_problem(http.post("/v1/jobs", json=job_body(name="n")), 409)


def test_jobs_page_with_a_cursor(api: Api) -> None:
    http = api.http(api.tenant())
    ids = {http.post("/v1/jobs", json=job_body(name=f"p{i}")).json()["id"] for i in range(5)}
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = http.get("/v1/jobs", params=params).json()
        assert len(page["jobs"]) <= 2
        seen += [j["id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids)


def test_cancel_by_name_and_by_prefix(api: Api) -> None:
    http = api.http(api.tenant())
    for name in ("retry:inv1:1", "retry:inv1:2", "retry:inv2:1"):
        http.post("/v1/jobs", json=job_body(name=name))
    assert http.post("/v1/jobs/cancel", json={"name": "retry:inv2:1"}).json() == {"cancelled": 1}
    assert http.post("/v1/jobs/cancel", json={"name_prefix": "retry:inv1:"}).json() == {
        "cancelled": 2
    }
    assert http.post("/v1/jobs/cancel", json={"name_prefix": "retry:"}).json() == {"cancelled": 0}
    assert_problem(http.post("/v1/jobs/cancel", json={}), 422, "name")
    assert_problem(
        http.post("/v1/jobs/cancel", json={"name": "a", "name_prefix": "b"}), 422, "name"
    )


# Schedules


def test_a_cron_schedule_is_created_paused_resumed_and_deleted(api: Api) -> None:
    http = api.http(api.tenant())
    created = http.post("/v1/schedules", json=schedule_body(name="nightly"))
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["cron"] == "30 2 * * *"
    assert schedule["timezone"] == "America/New_York"
    assert schedule["paused"] is False
    assert http.get(f"/v1/schedules/{schedule['id']}").json()["name"] == "nightly"
    assert [s["id"] for s in http.get("/v1/schedules").json()["schedules"]] == [schedule["id"]]

    upcoming = http.get(f"/v1/schedules/{schedule['id']}/upcoming", params={"count": 3}).json()
    instants = [datetime.fromisoformat(t) for t in upcoming["upcoming"]]
    assert len(instants) == 3 and instants == sorted(instants)
    assert all(
        (b - a) in (timedelta(hours=23), timedelta(hours=24), timedelta(hours=25))
        for a, b in itertools.pairwise(instants)
    )

    assert http.post(f"/v1/schedules/{schedule['id']}/pause").json()["paused"] is True
    assert http.post(f"/v1/schedules/{schedule['id']}/resume").json()["paused"] is False
    assert http.delete(f"/v1/schedules/{schedule['id']}").status_code == 204
    assert_problem(http.get(f"/v1/schedules/{schedule['id']}"), 404)
    assert http.delete(f"/v1/schedules/{schedule['id']}").status_code == 204  # idempotent
    assert http.get("/v1/schedules").json() == {"schedules": [], "next_cursor": None}


def test_an_anchor_schedule_clamps_to_the_end_of_month(api: Api) -> None:
    http = api.http(api.tenant())
    created = http.post(
        "/v1/schedules",
        json={
            "anchor": {
                "local": "2026-01-31T09:00:00",
                "timezone": "America/New_York",
                "every": "month",
                "interval": 1,
                "end_of_month": "clamp",
            },
            "target": {"url": TARGET},
        },
    )
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["anchor"]["end_of_month"] == "clamp"
    upcoming = http.get(f"/v1/schedules/{schedule['id']}/upcoming", params={"count": 4}).json()
    days = [datetime.fromisoformat(t).astimezone(UTC).day for t in upcoming["upcoming"]]
    assert all(day in (28, 29, 30, 31) for day in days)


# Idempotency keys


def test_the_same_key_and_request_replay_the_stored_response(api: Api) -> None:
    http = api.http(api.tenant())
    headers = {"Idempotency-Key": "key-1"}
    first = http.post("/v1/jobs", json=job_body(name="once"), headers=headers)
    assert first.status_code == 201
    assert "Idempotent-Replayed" not in first.headers
    # The same fields in another order and the key as an RFC 8941 string: the same request.
    reordered = {"target": {"url": TARGET}, "name": "once", "delay_seconds": 3600}
    replay = http.post("/v1/jobs", json=reordered, headers={"Idempotency-Key": '"key-1"'})
    assert replay.status_code == 201
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.content == first.content
    assert len(http.get("/v1/jobs").json()["jobs"]) == 1


def test_the_same_key_with_another_request_is_422(api: Api) -> None:
    http = api.http(api.tenant())
    headers = {"Idempotency-Key": "key-2"}
    assert http.post("/v1/jobs", json=job_body(name="a"), headers=headers).status_code == 201
    problem = assert_problem(
        http.post("/v1/jobs", json=job_body(name="b"), headers=headers), 422, "Idempotency-Key"
    )
    assert problem["type"].endswith("idempotency-key-reused")
    # Another path with the same key is another request too.
    assert_problem(http.post("/v1/schedules", json=schedule_body(), headers=headers), 422)


def _fail_once_after_commit(monkeypatch: pytest.MonkeyPatch, store: Any, method: str) -> None:
    """The store's `method` commits, then its first call raises as a lost connection would."""
    original = getattr(store, method)
    failed: list[bool] = []

    def commit_then_fail(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if not failed:
            failed.append(True)
            raise StorageError("the connection dropped after the commit")
        return result

    monkeypatch.setattr(store, method, commit_then_fail)


@pytest.mark.parametrize(
    ("path", "method", "body", "listing"),
    [
        ("/v1/schedules", "insert_schedule", schedule_body(), "schedules"),
        ("/v1/schedules", "insert_schedule", schedule_body(name="nightly"), "schedules"),
        ("/v1/jobs", "insert", job_body(), "jobs"),
        ("/v1/jobs", "insert", job_body(name="once"), "jobs"),
    ],
)
def test_a_retry_after_a_5xx_that_followed_the_commit_creates_nothing_twice(
    api: Api,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    method: str,
    body: dict[str, Any],
    listing: str,
) -> None:
    http = api.http(api.tenant())
    _fail_once_after_commit(monkeypatch, api.store, method)
    headers = {"Idempotency-Key": "lost-response"}
    assert_problem(http.post(path, json=body, headers=headers), 503)  # the 5xx frees the key
    retry = http.post(path, json=body, headers=headers)
    assert retry.status_code == 201, retry.text
    assert [item["id"] for item in http.get(path).json()[listing]] == [retry.json()["id"]]


def test_a_pruned_key_reused_for_another_request_is_a_new_request(api: Api) -> None:
    http = api.http(api.tenant())
    headers = {"Idempotency-Key": "reused"}
    first = http.post("/v1/jobs", json=job_body(name="first"), headers=headers)
    assert first.status_code == 201
    assert api.tables.prune_keys(older_than=datetime.now(UTC) + timedelta(days=1)) >= 1
    # Another body under the pruned key: a fresh job, not the old one answered as if new.
    other = http.post("/v1/jobs", json=job_body(name="second"), headers=headers)
    assert other.status_code == 201
    assert other.json()["id"] != first.json()["id"] and other.json()["name"] == "second"
    # The very first request again (its key pruned too by now): the job it created, not a twin.
    api.tables.prune_keys(older_than=datetime.now(UTC) + timedelta(days=1))
    again = http.post("/v1/jobs", json=job_body(name="first"), headers=headers)
    assert again.status_code == 201 and again.json()["id"] == first.json()["id"]
    assert len(http.get("/v1/jobs").json()["jobs"]) == 2


def test_a_key_in_flight_is_409_with_retry_after(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    # The first request is still being processed: hold its key as its handler would.
    body = json.dumps(job_body()).encode()
    from recoup.idempotency import fingerprint

    outcome = api.tables.begin(
        tenant=caller.tenant,
        key="busy",
        fingerprint=fingerprint("POST", "/v1/jobs", body),
        method="POST",
        path="/v1/jobs",
        now=datetime.now(UTC),
    )
    assert isinstance(outcome, New)
    response = http.post(
        "/v1/jobs",
        content=body,
        headers={"Idempotency-Key": "busy", "Content-Type": "application/json"},
    )
    problem = assert_problem(response, 409)
    assert problem["type"].endswith("idempotency-key-in-use")
    assert int(response.headers["Retry-After"]) >= 1


def test_a_stored_409_is_replayed_but_invalid_input_is_not_stored(api: Api) -> None:
    http = api.http(api.tenant())
    http.post("/v1/jobs", json=job_body(name="taken"))
    clash = http.post("/v1/jobs", json=job_body(name="taken"), headers={"Idempotency-Key": "c"})
    assert clash.status_code == 409
    again = http.post("/v1/jobs", json=job_body(name="taken"), headers={"Idempotency-Key": "c"})
    assert again.status_code == 409 and again.headers["Idempotent-Replayed"] == "true"
    # An invalid request never claims its key: the corrected request may use it.
    bad = job_body(target={"url": "ftp://example.com/x"})
    assert http.post("/v1/jobs", json=bad, headers={"Idempotency-Key": "d"}).status_code == 422
    fixed = http.post("/v1/jobs", json=job_body(), headers={"Idempotency-Key": "d"})
    assert fixed.status_code == 201


def test_a_malformed_key_is_400(api: Api) -> None:
    http = api.http(api.tenant())
    response = http.post("/v1/jobs", json=job_body(), headers={"Idempotency-Key": "two words"})
    assert_problem(response, 400, "Idempotency-Key")


def test_keys_are_scoped_per_tenant(api: Api) -> None:
    a, b = api.http(api.tenant()), api.http(api.tenant())
    key = {"Idempotency-Key": "shared"}
    job_a = a.post("/v1/jobs", json=job_body(), headers=key).json()
    reply_b = b.post("/v1/jobs", json=job_body(), headers=key)
    assert reply_b.status_code == 201 and "Idempotent-Replayed" not in reply_b.headers
    assert reply_b.json()["id"] != job_a["id"]


def test_fifty_concurrent_posts_with_one_key_create_one_job(api: Api) -> None:
    caller = api.tenant()
    clients = [api.http(caller) for _ in range(10)]
    key = {"Idempotency-Key": str(uuid.uuid4())}
    barrier = threading.Barrier(50)
    responses: list[httpx.Response] = []
    lock = threading.Lock()

    def post(i: int) -> None:
        barrier.wait()
        response = clients[i % 10].post("/v1/jobs", json=job_body(name="one"), headers=key)
        with lock:
            responses.append(response)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(responses) == 50
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {201, 409}, statuses
    created = [r for r in responses if r.status_code == 201]
    assert len({r.content for r in created}) == 1  # the same status and body, every one
    assert sum("Idempotent-Replayed" not in r.headers for r in created) == 1
    for conflict in (r for r in responses if r.status_code == 409):
        assert conflict.json()["type"].endswith("idempotency-key-in-use")
        assert "Retry-After" in conflict.headers
    jobs = clients[0].get("/v1/jobs").json()["jobs"]
    assert len(jobs) == 1
    assert json.loads(created[0].content)["id"] == jobs[0]["id"]
    # After the race, the key answers with the stored response.
    late = clients[0].post("/v1/jobs", json=job_body(name="one"), headers=key)
    assert late.status_code == 201 and late.content == created[0].content


# Authentication and tenancy


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer",
        "Bearer rcp_not-a-real-token",
        "Basic dXNlcjpwYXNz",
        "rcp_missing-scheme",
    ],
)
def test_missing_or_wrong_tokens_are_401(api: Api, authorization: str | None) -> None:
    http = api.http()
    headers = {"Authorization": authorization} if authorization else {}
    response = http.get("/v1/jobs", headers=headers)
    assert_problem(response, 401)
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert_problem(http.post("/v1/jobs", json=job_body(), headers=headers), 401)


def test_a_revoked_token_is_401_at_once_and_other_tokens_still_work(api: Api) -> None:
    caller = api.tenant()
    other = issue_token(api.tables, caller.tenant, now=datetime.now(UTC))
    http = api.http(caller)
    assert http.get("/v1/jobs").status_code == 200
    [first, _] = api.tables.list_tokens(caller.tenant)
    api.tables.revoke_token(first.id, now=datetime.now(UTC))
    assert_problem(http.get("/v1/jobs"), 401)
    assert_problem(http.post("/v1/jobs", json=job_body()), 401)
    assert (
        api.http().get("/v1/jobs", headers={"Authorization": f"Bearer {other.secret}"}).status_code
        == 200
    )


def test_another_tenants_resources_are_404_on_every_route(api: Api) -> None:
    owner, intruder = api.http(api.tenant()), api.http(api.tenant())
    job = owner.post("/v1/jobs", json=job_body(name="mine")).json()
    schedule = owner.post("/v1/schedules", json=schedule_body(name="mine")).json()
    j, s = job["id"], schedule["id"]
    routes: list[Callable[[], httpx.Response]] = [
        lambda: intruder.get(f"/v1/jobs/{j}"),
        lambda: intruder.get(f"/v1/jobs/{j}/runs"),
        lambda: intruder.delete(f"/v1/jobs/{j}"),
        lambda: intruder.get(f"/v1/schedules/{s}"),
        lambda: intruder.get(f"/v1/schedules/{s}/upcoming"),
        lambda: intruder.post(f"/v1/schedules/{s}/pause"),
        lambda: intruder.post(f"/v1/schedules/{s}/resume"),
        lambda: intruder.delete(f"/v1/schedules/{s}"),
    ]
    for call in routes:
        assert_problem(call(), 404)
    # Lists and bulk cancels see only the caller's own.
    assert intruder.get("/v1/jobs").json()["jobs"] == []
    assert intruder.get("/v1/schedules").json()["schedules"] == []
    assert intruder.post("/v1/jobs/cancel", json={"name": "mine"}).json() == {"cancelled": 0}
    assert intruder.post("/v1/jobs/cancel", json={"name_prefix": "m"}).json() == {"cancelled": 0}
    # A name taken in one tenant is free in another.
    assert intruder.post("/v1/jobs", json=job_body(name="mine")).status_code == 201
    # The owner's job and schedule are untouched.
    assert owner.get(f"/v1/jobs/{j}").json()["state"] == "scheduled"
    assert owner.get(f"/v1/schedules/{s}").json()["paused"] is False


# Validation: every error is a 4xx problem naming the field


VALIDATION_CASES: list[tuple[str, str, dict[str, Any], str]] = [
    # (route, case, body, the field the problem must name)
    ("/v1/jobs", "neither run_at nor delay", {"target": {"url": TARGET}}, "delay_seconds"),
    ("/v1/jobs", "both run_at and delay", job_body(run_at="2030-01-01T00:00:00Z"), "run_at"),
    (
        "/v1/jobs",
        "naive run_at",
        job_body(delay_seconds=None, run_at="2030-01-01T00:00:00"),
        "run_at",
    ),
    ("/v1/jobs", "run_at not a date", job_body(delay_seconds=None, run_at="tomorrow"), "run_at"),
    ("/v1/jobs", "negative delay", job_body(delay_seconds=-1), "delay_seconds"),
    ("/v1/jobs", "delay not a number", job_body(delay_seconds="soon"), "delay_seconds"),
    ("/v1/jobs", "no target", {"delay_seconds": 1}, "target"),
    ("/v1/jobs", "no url", job_body(target={"method": "POST"}), "target.url"),
    ("/v1/jobs", "ftp url", job_body(target={"url": "ftp://example.com/"}), "target.url"),
    ("/v1/jobs", "url without host", job_body(target={"url": "http:///x"}), "target.url"),
    (
        "/v1/jobs",
        "unknown method",
        job_body(target={"url": TARGET, "method": "BREW"}),
        "target.method",
    ),
    (
        "/v1/jobs",
        "header not a string",
        job_body(target={"url": TARGET, "headers": {"a": 1}}),
        "target.headers.a",
    ),
    (
        "/v1/jobs",
        "unknown target field",
        job_body(target={"url": TARGET, "verb": "GET"}),
        "target.verb",
    ),
    ("/v1/jobs", "unknown top-level field", job_body(priority=1), "priority"),
    ("/v1/jobs", "empty name", job_body(name=""), "name"),
    ("/v1/jobs", "long name", job_body(name="x" * 201), "name"),
    ("/v1/jobs", "zero attempts", job_body(retry={"max_attempts": 0}), "retry.max_attempts"),
    (
        "/v1/jobs",
        "max backoff below min",
        job_body(retry={"min_backoff_seconds": 10, "max_backoff_seconds": 1}),
        "retry.max_backoff_seconds",
    ),
    (
        "/v1/jobs",
        "zero min backoff",
        job_body(retry={"min_backoff_seconds": 0}),
        "retry.min_backoff_seconds",
    ),
    (
        "/v1/jobs",
        "a name shaped like a schedule occurrence",
        job_body(name="nightly@2026-03-01T12:00:00Z"),
        "name",
    ),
    ("/v1/jobs", "zero timeout", job_body(timeout_seconds=0), "timeout_seconds"),
    ("/v1/jobs", "timeout over an hour", job_body(timeout_seconds=3601), "timeout_seconds"),
    ("/v1/jobs/cancel", "unknown field", {"names": ["a"]}, "names"),
    ("/v1/schedules", "neither cron nor anchor", {"target": {"url": TARGET}}, "anchor"),
    ("/v1/schedules", "cron without timezone", schedule_body(timezone=None), "timezone"),
    ("/v1/schedules", "bad cron", schedule_body(cron="61 * * * *"), "cron"),
    ("/v1/schedules", "unknown zone", schedule_body(timezone="Mars/Olympus"), "timezone"),
    (
        "/v1/schedules",
        "both cron and anchor",
        schedule_body(anchor={"local": "2026-01-31T09:00:00", "timezone": "UTC"}),
        "cron",
    ),
    (
        "/v1/schedules",
        "anchor with an offset",
        {"anchor": {"local": "2026-01-31T09:00:00Z", "timezone": "UTC"}, "target": {"url": TARGET}},
        "anchor.local",
    ),
    (
        "/v1/schedules",
        "anchor unknown zone",
        {
            "anchor": {"local": "2026-01-31T09:00:00", "timezone": "Nowhere"},
            "target": {"url": TARGET},
        },
        "anchor.timezone",
    ),
    (
        "/v1/schedules",
        "anchor bad every",
        {
            "anchor": {"local": "2026-01-31T09:00:00", "timezone": "UTC", "every": "fortnight"},
            "target": {"url": TARGET},
        },
        "anchor.every",
    ),
    (
        "/v1/schedules",
        "anchor bad end of month",
        {
            "anchor": {"local": "2026-01-31T09:00:00", "timezone": "UTC", "end_of_month": "x"},
            "target": {"url": TARGET},
        },
        "anchor.end_of_month",
    ),
    ("/v1/schedules", "name with @", schedule_body(name="a@b"), "name"),
    ("/v1/schedules", "bad missed policy", schedule_body(missed="sometimes"), "missed"),
]


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        pytest.param(route, body, field, id=f"{route}: {case}")
        for route, case, body, field in VALIDATION_CASES
    ],
)
def test_every_validation_error_is_a_422_problem_naming_the_field(
    api: Api, route: str, body: dict[str, Any], field: str
) -> None:
    http = api.http(api.tenant())
    body = {k: v for k, v in body.items() if v is not None}
    assert_problem(http.post(route, json=body), 422, field)


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/v1/jobs", {"state": "sleeping"}, "state"),
        ("/v1/jobs", {"limit": 0}, "limit"),
        ("/v1/jobs", {"limit": "many"}, "limit"),
        ("/v1/jobs", {"cursor": "not-a-cursor"}, "cursor"),
    ],
)
def test_query_errors_name_the_parameter(
    api: Api, path: str, params: dict[str, Any], field: str
) -> None:
    http = api.http(api.tenant())
    assert_problem(http.get(path, params=params), 422, field)


def test_upcoming_count_is_bounded(api: Api) -> None:
    http = api.http(api.tenant())
    schedule = http.post("/v1/schedules", json=schedule_body()).json()
    assert_problem(http.get(f"/v1/schedules/{schedule['id']}/upcoming?count=0"), 422, "count")
    assert_problem(http.get(f"/v1/schedules/{schedule['id']}/upcoming?count=101"), 422, "count")


def test_bodies_that_are_not_json_objects_are_problems(api: Api) -> None:
    http = api.http(api.tenant())
    json_header = {"Content-Type": "application/json"}
    assert_problem(http.post("/v1/jobs", content=b"{not json", headers=json_header), 422, "body")
    assert_problem(http.post("/v1/jobs", content=b"[1, 2]", headers=json_header), 422)
    assert_problem(http.post("/v1/jobs", content=b"", headers=json_header), 422, "body")


def test_a_target_refused_by_the_ssrf_guard_is_422_naming_the_rule(
    make_api: Callable[..., Api],
) -> None:
    from recoup.jobs.ssrf import SsrfGuard

    api = make_api(ssrf=SsrfGuard())  # the default: public targets only
    http = api.http(api.tenant())
    for url, rule in [
        ("http://127.0.0.1:8080/x", "loopback"),
        ("http://10.1.2.3/x", "private"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[::ffff:127.0.0.1]/x", "loopback"),
    ]:
        problem = assert_problem(
            http.post("/v1/jobs", json=job_body(target={"url": url})), 422, "target.url"
        )
        assert problem["rule"] == rule
        assert rule in problem["detail"]


def test_a_body_over_the_limit_is_413(make_api: Callable[..., Api]) -> None:
    api = make_api(max_body_bytes=2048)
    http = api.http(api.tenant())
    big = job_body(target={"url": TARGET, "body": "x" * 4096})
    problem = assert_problem(http.post("/v1/jobs", json=big), 413)
    assert "2048" in problem["detail"]

    def chunks() -> Any:  # no Content-Length: the limit is enforced while reading
        yield b'{"delay_seconds": 1, "target": {"url": "' + TARGET.encode() + b'", "body": "'
        for _ in range(10):
            yield b"y" * 512
        yield b'"}}'

    streamed = http.post("/v1/jobs", content=chunks(), headers={"Content-Type": "application/json"})
    assert_problem(streamed, 413)


def test_unknown_routes_and_methods_are_problems(api: Api) -> None:
    http = api.http(api.tenant())
    assert_problem(http.get("/v1/nothing-here"), 404)
    assert_problem(http.put("/v1/jobs"), 405)
    assert_problem(http.get("/v1/jobs/" + "x" * 101), 422, "job_id")


def test_an_unexpected_error_is_a_bare_logged_500(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    http = api.http(api.tenant())
    scheduler = api.app.state.services.scheduler

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internals: password=hunter2")

    monkeypatch.setattr(scheduler, "list_jobs", broken)
    monkeypatch.setattr(scheduler, "insert_checked", broken)  # what POST /v1/jobs runs
    # … and what its fast path runs instead, once the token is cached (`create_at_once`).
    monkeypatch.setattr(api.app.state.services.tables, "create_job", broken)
    with caplog.at_level(logging.ERROR, logger="recoup.api"):
        response = http.get("/v1/jobs")
        posted = http.post("/v1/jobs", json=job_body(), headers={"Idempotency-Key": "boom"})
    for reply in (response, posted):
        problem = assert_problem(reply, 500)
        assert "hunter2" not in reply.text and "RuntimeError" not in reply.text
        assert problem["type"].endswith("internal-error")
    assert "hunter2" in caplog.text  # logged on the server side
    # The key of the failed POST was released: a retry with it runs the operation again.
    monkeypatch.undo()
    retried = http.post("/v1/jobs", json=job_body(), headers={"Idempotency-Key": "boom"})
    assert retried.status_code == 201 and "Idempotent-Replayed" not in retried.headers


# Operations


def test_health_readiness_and_metrics(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    assert api.http().get("/healthz").json() == {"status": "ok"}
    assert api.http().get("/readyz").json() == {"status": "ok"}
    http.post("/v1/jobs", json=job_body(delay_seconds=0))
    http.get("/v1/jobs/no-such-job")
    text = api.http().get("/metrics").text
    assert 'recoup_jobs{state="scheduled"} 1.0' in text
    assert "recoup_jobs_due 1.0" in text
    # Labelled by tenant: declared at once, a series per tenant once its jobs fire.
    assert "# TYPE recoup_firing_lag_seconds histogram" in text
    assert f'recoup_tenant_jobs{{state="scheduled",tenant="{caller.tenant}"}} 1.0' in text
    assert 'recoup_http_requests_total{method="POST",route="/v1/jobs",status="201"} 1.0' in text
    assert (
        'recoup_http_requests_total{method="GET",route="/v1/jobs/{job_id}",status="404"} 1.0'
        in text
    )


def test_readiness_fails_with_503_when_the_database_is_gone(
    make_api: Callable[..., Api], store: Any
) -> None:
    api = make_api()
    store.close()
    assert_problem(api.http().get("/readyz"), 503)


def test_openapi_describes_every_route_and_problem_bodies(api: Api) -> None:
    spec = api.http().get("/openapi.json").json()
    paths = spec["paths"]
    for path, methods in {
        "/v1/jobs": {"get", "post"},
        "/v1/jobs/cancel": {"post"},
        "/v1/jobs/{job_id}": {"get", "delete"},
        "/v1/jobs/{job_id}/runs": {"get"},
        "/v1/schedules": {"get", "post"},
        "/v1/schedules/{schedule_id}": {"get", "delete"},
        "/v1/schedules/{schedule_id}/pause": {"post"},
        "/v1/schedules/{schedule_id}/resume": {"post"},
        "/v1/schedules/{schedule_id}/upcoming": {"get"},
        "/healthz": {"get"},
        "/readyz": {"get"},
        "/metrics": {"get"},
    }.items():
        assert methods <= paths[path].keys(), path
    created = paths["/v1/jobs"]["post"]["responses"]
    assert created["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/JobOut")
    assert "application/problem+json" in created["422"]["content"]
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    run_fields = spec["components"]["schemas"]["RunOut"]["properties"].keys()
    assert {
        "attempt",
        "started_at",
        "finished_at",
        "duration_ms",
        "status_code",
        "error",
        "response_excerpt",
    } <= run_fields


def test_the_app_prunes_keys_past_their_retention(make_api: Callable[..., Api]) -> None:
    api = make_api(
        idempotency_retention=timedelta(hours=24), prune_every=timedelta(milliseconds=50)
    )
    caller = api.tenant()
    long_ago = datetime.now(UTC) - timedelta(hours=25)
    for key, when in (("old", long_ago), ("fresh", datetime.now(UTC))):
        begin = {"fingerprint": "f", "method": "POST", "path": "/v1/jobs", "now": when}
        assert api.tables.begin(tenant=caller.tenant, key=key, **begin) == New(locked_at=when)
    deadline = time.monotonic() + 10
    while api.tables.begin(
        tenant=caller.tenant, key="old", fingerprint="g", method="POST", path="/", now=long_ago
    ) != New(locked_at=long_ago):  # a mismatch while the old key exists; New once it was pruned
        assert time.monotonic() < deadline
        time.sleep(0.05)
    fresh = api.tables.begin(
        tenant=caller.tenant, key="fresh", fingerprint="g", method="POST", path="/",
        now=datetime.now(UTC),
    )  # fmt: skip
    assert fresh == Mismatch()  # still there


def test_metrics_want_the_operators_token_when_one_is_set(make_api: Callable[..., Api]) -> None:
    api = make_api(metrics_token="scrape-me-9f2c")
    assert api.http().get("/metrics").status_code == 401
    wrong = api.http().get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert wrong.status_code == 401
    assert wrong.headers["content-type"] == "application/problem+json"
    assert wrong.headers["www-authenticate"] == "Bearer"
    tenant = api.http(api.tenant()).get("/metrics")  # a tenant's API token is not it
    assert tenant.status_code == 401
    good = api.http().get("/metrics", headers={"Authorization": "Bearer scrape-me-9f2c"})
    assert good.status_code == 200 and "recoup_jobs_due" in good.text


def test_metrics_without_a_token_answer_loopback_clients_only(api: Api) -> None:
    assert api.http().get("/metrics").status_code == 200  # the test server is on 127.0.0.1

    async def from_afar() -> httpx.Response:
        transport = httpx.ASGITransport(app=api.app, client=("203.0.113.7", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://recoup") as http:
            return await http.get("/metrics")

    refused = asyncio.run(from_afar())
    assert refused.status_code == 403
    assert "--metrics-token" in refused.json()["detail"]


def test_a_key_is_freed_even_when_its_first_release_meets_a_dropped_connection(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the chaos run: after pg_terminate_backend, the operation failed and so did the
    # release on the pool's next dropped connection, leaving the key locked (409) for 60 s.
    http = api.http(api.tenant())
    services = api.app.state.services
    tables, scheduler = services.tables, services.scheduler
    release = tables.release
    failures = iter([StorageError("server closed the connection")] * 2)

    def dropped(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("terminating connection due to administrator command")

    def flaky_release(*args: Any, **kwargs: Any) -> Any:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return release(*args, **kwargs)

    monkeypatch.setattr(scheduler, "cancel_by_prefix", dropped)
    monkeypatch.setattr(tables, "release", flaky_release)
    body = {"name_prefix": "night"}
    failed = http.post("/v1/jobs/cancel", json=body, headers={"Idempotency-Key": "k-drop"})
    assert failed.status_code == 503, failed.text
    assert next(failures, None) is None  # both failed releases were tried again
    monkeypatch.undo()
    again = http.post("/v1/jobs/cancel", json=body, headers={"Idempotency-Key": "k-drop"})
    assert again.status_code == 200, again.text
    assert "Idempotent-Replayed" not in again.headers
