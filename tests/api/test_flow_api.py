"""The API's flow control, order within a key and replace (issue 23): what POST /v1/jobs
takes and answers; the mechanisms themselves are the store's (tests/storage/test_flow_claims)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from recoup.jobs.model import JobState
from recoup.jobs.schedules.occurrences import occurrence_job
from recoup.jobs.store import ClaimParams
from tests.api.conftest import TARGET, Api


def job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"delay_seconds": 3600, "target": {"url": TARGET}}
    body.update(overrides)
    return body


def test_a_job_carries_its_flow_and_ordering_key(api: Api) -> None:
    http = api.http(api.tenant())
    flowing = http.post(
        "/v1/jobs", json=job_body(flow={"key": "acct_1", "rate": 5, "period_seconds": 2})
    )
    assert flowing.status_code == 201, flowing.text
    assert flowing.json()["flow"] == {
        "key": "acct_1",
        "rate": 5,
        "period_seconds": 2.0,
        "parallelism": None,
    }
    ordered = http.post("/v1/jobs", json=job_body(ordering_key="cus_1")).json()
    assert ordered["ordering_key"] == "cus_1" and ordered["ordering_on_failure"] == "hold"
    assert ordered["flow"] is None


def test_limits_that_cannot_hold_are_refused_naming_the_field(api: Api) -> None:
    http = api.http(api.tenant())
    for body, field in (
        (job_body(flow={"key": "k"}), "flow_key"),
        (job_body(flow={"key": "k", "rate": 0}), "flow.rate"),
        (job_body(flow={"key": "k", "rate": 1}, ordering_key="o"), "ordering_key"),
        (job_body(on_conflict="replace"), "on_conflict"),
    ):
        answer = http.post("/v1/jobs", json=body)
        assert answer.status_code == 422, answer.text
        assert field in answer.text


def test_replace_replaces_the_job_not_yet_started_and_answers_a_started_one_as_it_is(
    api: Api,
) -> None:
    caller = api.tenant()
    http = api.http(caller)
    first = http.post("/v1/jobs", json=job_body(idempotency_key="digest:u1")).json()
    replaced = http.post(
        "/v1/jobs",
        json=job_body(
            idempotency_key="digest:u1",
            delay_seconds=60,
            on_conflict="replace",
            target={"url": TARGET, "body": {"n": 2}},
        ),
    )
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["id"] == first["id"]
    assert replaced.json()["run_at"] < first["run_at"]  # a debounce moves the run
    assert replaced.json()["target"]["body"] == {"n": 2}
    # Claimed (started): a replace answers it unchanged.
    now = datetime.now(UTC)
    claimed = api.store.claim_due(
        ClaimParams(
            worker_id="w", now=now, horizon=timedelta(hours=2), lease=timedelta(minutes=5), limit=10
        )
    )
    assert [j.id for j in claimed] == [first["id"]]
    late = http.post(
        "/v1/jobs", json=job_body(idempotency_key="digest:u1", on_conflict="replace")
    ).json()
    assert late["id"] == first["id"] and late["state"] == JobState.RUNNING
    assert late["run_at"] == replaced.json()["run_at"]


def test_a_schedule_gives_its_flow_to_every_job_it_fires(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    created = http.post(
        "/v1/schedules",
        json={
            "cron": "0 9 * * *",
            "timezone": "UTC",
            "target": {"url": TARGET},
            "flow": {"key": "merchant:m1", "parallelism": 2},
        },
    )
    assert created.status_code == 201, created.text
    assert created.json()["flow"]["key"] == "merchant:m1"
    stored = api.store.get_schedule(caller.tenant, created.json()["id"])
    assert stored is not None and stored.flow is not None
    fired = occurrence_job(stored, datetime(2030, 1, 1, 9, tzinfo=UTC))
    assert (fired.flow_key, fired.flow_parallelism) == ("merchant:m1", 2)
    refused = http.post(
        "/v1/schedules",
        json={
            "cron": "0 9 * * *",
            "timezone": "UTC",
            "target": {"url": TARGET},
            "flow": {"key": "k"},
        },
    )
    assert refused.status_code == 422 and "flow_key" in refused.text


def test_a_job_its_key_holds_back_says_so(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    ids = [
        http.post(
            "/v1/jobs", json=job_body(delay_seconds=0, flow={"key": "slow", "parallelism": 1})
        ).json()["id"]
        for _ in range(2)
    ]
    plain = http.post("/v1/jobs", json=job_body(delay_seconds=0)).json()["id"]
    now = datetime.now(UTC)
    params = ClaimParams(
        worker_id="w", now=now, horizon=timedelta(0), lease=timedelta(minutes=5), limit=10
    )
    claimed = {j.id for j in api.store.claim_due(params)}
    assert ids[0] in claimed and ids[1] not in claimed and plain in claimed
    held = http.get(f"/v1/jobs/{ids[1]}").json()
    assert held["state"] == "scheduled" and held["waiting_for"] == "flow_key"
    assert http.get(f"/v1/jobs/{ids[0]}").json()["waiting_for"] is None
