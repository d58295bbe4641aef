"""Who may call the API, on both backends: a disabled tenant's tokens are 403 at once and work
again once it is enabled; a deleted tenant's are 401; past its rate limit a tenant gets 429
with `Retry-After` (one token bucket per tenant, on a clock the test steps)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from recoup.api.app import create_app
from recoup.api.rate_limits import RateLimit, TenantRateLimiter
from recoup.storage import Store
from recoup.tenancy import delete_tenant
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import TARGET, Api, api_settings
from tests.support import ServerThread

PROBLEM = "application/problem+json"


def _new_job(client: httpx.Client) -> httpx.Response:
    return client.post("/v1/jobs", json={"delay_seconds": 60, "target": {"url": TARGET}})


def test_a_disabled_tenants_tokens_are_403_at_once_and_work_again_once_enabled(
    api: Api,
) -> None:
    acme, other = api.tenant("acme"), api.tenant("other")
    client, others = api.http(acme), api.http(other)
    assert _new_job(client).status_code == 201

    api.store.set_tenant_disabled("acme", disabled=True, now=SystemClock().now())
    for response in (client.get("/v1/jobs"), _new_job(client)):
        assert response.status_code == 403
        assert response.headers["content-type"] == PROBLEM
        problem = response.json()
        assert problem["type"] == "urn:recoup:problem:tenant-disabled"
        assert "acme" in problem["detail"] and acme.token not in response.text
    assert others.get("/v1/jobs").status_code == 200  # the others are untouched

    api.store.set_tenant_disabled("acme", disabled=False, now=SystemClock().now())
    listed = client.get("/v1/jobs")
    assert listed.status_code == 200 and len(listed.json()["jobs"]) == 1


def test_a_deleted_tenants_tokens_are_401(api: Api) -> None:
    acme = api.tenant("acme")
    client = api.http(acme)
    assert _new_job(client).status_code == 201
    api.store.set_tenant_disabled("acme", disabled=True, now=SystemClock().now())
    assert delete_tenant(api.store, "acme") is not None
    response = client.get("/v1/jobs")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["type"] == "urn:recoup:problem:unauthorized"
    assert acme.token not in response.text


class SteppedClock:
    """A monotonic clock that moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def limited(store: Store, api: Api) -> Iterator[tuple[Api, SteppedClock]]:
    """A second app over the same store, limited to 3 requests/s per tenant on a stepped
    clock."""
    clock = SteppedClock()
    limiter = TenantRateLimiter(RateLimit.parse("3/s") or RateLimit(1, 1), monotonic=clock)
    app = create_app(store, clock=SystemClock(), settings=api_settings(), limiter=limiter)
    with ServerThread(app) as server:
        found = Api(server.url, store, api.tables, app)
        try:
            yield found, clock
        finally:
            for client in found.clients:
                client.close()


def test_past_its_rate_limit_a_tenant_gets_429_with_retry_after(
    limited: tuple[Api, SteppedClock],
) -> None:
    api, clock = limited
    acme, other = api.tenant("acme"), api.tenant("other")
    client = api.http(acme)
    assert [client.get("/v1/jobs").status_code for _ in range(3)] == [200] * 3
    refused = client.get("/v1/jobs")
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["content-type"] == PROBLEM
    assert refused.json()["type"] == "urn:recoup:problem:rate-limited"
    posted = _new_job(client)  # POSTs too (answered by the fast lane), before any write
    assert (posted.status_code, posted.headers["retry-after"]) == (429, "1")
    assert posted.json()["type"] == "urn:recoup:problem:rate-limited"
    assert api.http(other).get("/v1/jobs").status_code == 200  # one bucket per tenant

    clock.now += 1 / 3  # one request's worth refilled
    assert client.get("/v1/jobs").status_code == 200
    assert client.get("/v1/jobs").status_code == 429
    clock.now += 10  # a full bucket, no more: the burst is still 3
    assert [client.get("/v1/jobs").status_code for _ in range(4)] == [200, 200, 200, 429]
    assert client.get("/v1/jobs/unknown").status_code == 429
    assert client.get("/v1/jobs", params={"limit": 1}).status_code == 429
    assert sum(api.store.count_by_state("acme").values()) == 0  # the refused POST wrote nothing


def test_unauthenticated_requests_and_probes_are_not_counted(
    limited: tuple[Api, SteppedClock],
) -> None:
    api, _ = limited
    acme = api.tenant("acme")
    anonymous = api.http()
    for _ in range(10):
        assert anonymous.get("/v1/jobs").status_code == 401
        assert anonymous.get("/healthz").status_code == 200
    assert api.http(acme).get("/v1/jobs").status_code == 200


def test_without_a_limit_nothing_is_refused(api: Api) -> None:
    client = api.http(api.tenant("acme"))
    assert {client.get("/v1/jobs").status_code for _ in range(50)} == {200}


def test_the_openapi_document_lists_the_refusals_of_every_v1_operation(api: Api) -> None:
    document = api.http().get("/openapi.json").json()
    # The provider intakes carry no bearer token: the provider's signature authenticates them
    # (a bad one is a 400), so they have no 401/403/429 to list.
    operations = [
        (path, method, operation)
        for path, item in document["paths"].items()
        if path.startswith("/v1/") and not path.startswith("/v1/intake/")
        for method, operation in item.items()
    ]
    assert operations
    for path, method, operation in operations:
        for status in ("401", "403", "429"):
            response = operation["responses"].get(status)
            assert response is not None, (method, path, status)
            assert PROBLEM in response["content"], (method, path, status)
