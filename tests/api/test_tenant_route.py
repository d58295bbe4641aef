"""GET /v1/tenant: whose the bearer token is (what `recoup --url` prints and checks
`--tenant` against), never without a token."""

from __future__ import annotations

from tests.api.conftest import Api


def test_the_tenant_route_names_the_tokens_tenant(api: Api) -> None:
    acme, beta = api.tenant(), api.tenant()
    assert api.http(acme).get("/v1/tenant").json() == {"id": acme.tenant}
    assert api.http(beta).get("/v1/tenant").json() == {"id": beta.tenant}


def test_the_tenant_route_wants_a_token(api: Api) -> None:
    answer = api.http().get("/v1/tenant")
    assert answer.status_code == 401
    assert answer.headers["content-type"].startswith("application/problem+json")
