"""A job's own idempotency key (`idempotency_key` in the body), chosen by the caller: what
every delivery carries, and at most one job of the tenant per key. Distinct from the request's
`Idempotency-Key` header, which replays one request's answer."""

from __future__ import annotations

from typing import Any

import pytest

from recoup.client import Client, Unprocessable
from tests.api.conftest import TARGET, Api


def job_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"delay_seconds": 3600, "target": {"url": TARGET}}
    body.update(overrides)
    return body


def test_the_chosen_key_is_the_jobs_and_a_second_job_with_it_is_the_first(api: Api) -> None:
    caller = api.tenant()
    http = api.http(caller)
    first = http.post("/v1/jobs", json=job_body(idempotency_key="receipt:inv_42"))
    assert first.status_code == 201, first.text
    job = first.json()
    assert job["idempotency_key"] == "receipt:inv_42"
    stored = api.store.get(caller.tenant, job["id"])
    assert stored is not None and stored.idempotency_key == "receipt:inv_42"  # as delivered
    # Another request (its own header key, another delay) with the same job key: the first job.
    again = http.post(
        "/v1/jobs",
        json=job_body(idempotency_key="receipt:inv_42", delay_seconds=60),
        headers={"Idempotency-Key": "another-request"},
    )
    assert again.status_code == 200 and "Idempotent-Replayed" not in again.headers
    assert again.json()["id"] == job["id"] and again.json()["run_at"] == job["run_at"]
    assert len(http.get("/v1/jobs").json()["jobs"]) == 1
    # Keys are the tenant's: another tenant's job with the same key is its own.
    other = api.http(api.tenant()).post("/v1/jobs", json=job_body(idempotency_key="receipt:inv_42"))
    assert other.status_code == 201 and other.json()["id"] != job["id"]


def test_without_a_chosen_key_deliveries_carry_the_request_key_or_the_job_id(api: Api) -> None:
    http = api.http(api.tenant())
    bare = http.post("/v1/jobs", json=job_body()).json()
    assert bare["idempotency_key"] == bare["id"]
    keyed = http.post("/v1/jobs", json=job_body(), headers={"Idempotency-Key": "req-1"}).json()
    assert keyed["idempotency_key"].startswith("req-1#")  # the request's key and fingerprint
    chosen = http.post(
        "/v1/jobs", json=job_body(idempotency_key="mine-1"), headers={"Idempotency-Key": "req-2"}
    ).json()
    assert chosen["idempotency_key"] == "mine-1"


@pytest.mark.parametrize(
    "key", ["", "has space", 'quote"d', "back\\slash", "caf\u00e9", "x" * 256, 42]
)
def test_a_key_no_header_could_carry_is_refused_naming_the_field(api: Api, key: object) -> None:
    answer = api.http(api.tenant()).post("/v1/jobs", json=job_body(idempotency_key=key))
    assert answer.status_code == 422
    problem = answer.json()
    assert [e["field"] for e in problem["errors"]] == ["idempotency_key"]
    assert "idempotency_key" in problem["detail"]


def test_the_client_sends_the_job_key_apart_from_the_request_key(api: Api) -> None:
    caller = api.tenant()
    with Client(api.url, caller.token) as client:
        first = client.create_job(TARGET, delay_seconds=60, job_key="k-1")
        second = client.create_job(TARGET, delay_seconds=600, job_key="k-1")
        assert second.id == first.id and first.idempotency_key == "k-1"
        with pytest.raises(Unprocessable) as refused:
            client.create_job(TARGET, delay_seconds=60, job_key="not a key")
        assert "idempotency_key" in str(refused.value)
