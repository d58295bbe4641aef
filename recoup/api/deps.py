"""The routes' dependencies: the app's state, the authenticated tenant, a POST's key context.

Each reads what it needs from `request.app.state.api` (an `ApiState`), so a router is a plain
module-level `APIRouter` and one app's state never leaks into another's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from recoup.api.idempotent import PostContext, post_context
from recoup.api.operator_actions import Operator
from recoup.api.problems import ApiProblem
from recoup.api.query_params import refuse_unknown_query
from recoup.api.rate_limits import retry_after
from recoup.api.state import ApiState
from recoup.idempotency import KEY_HEADER_PATTERN
from recoup.tenancy import token_name

bearer = HTTPBearer(auto_error=False, description="A tenant's API token (`rcp_…`).")


async def api_state(request: Request) -> ApiState:
    """The `ApiState` that `create_app` set on the app serving this request. (A coroutine, so
    FastAPI calls it on the event loop: a plain function would cost a thread-pool hop.)"""
    state = request.app.state.api
    assert isinstance(state, ApiState), "create_app sets app.state.api"
    return state


Api = Annotated[ApiState, Depends(api_state)]


_RATE_COUNTED = "recoup.rate_counted"  # the request's scope: its tenant's bucket has counted it


def tenant_of(
    request: Request,
    api: Api,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> str:
    """The tenant of the request's bearer token: 401 without an active token (unknown,
    revoked, or its tenant deleted), 403 when its tenant is disabled (the token is genuine,
    the tenant may not act), 429 with `Retry-After` past the tenant's rate limit. The token
    is never echoed."""
    token = credentials.credentials if credentials else None
    owner = api.services.identify(token) if token is not None else None
    if token is not None:
        # What the hot paths read instead of the token (`recoup.api.token_cache`).
        if owner is not None and not owner.disabled:
            api.tokens.remember(token, owner.tenant, owner.epoch)
        else:
            api.tokens.forget(token)
    if owner is None:
        raise ApiProblem(
            401,
            "unauthorized",
            "expected `Authorization: Bearer <token>` with an active token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if owner.disabled:
        raise ApiProblem(
            403,
            "tenant-disabled",
            f"tenant {owner.tenant!r} is disabled; its operator can enable it again",
        )
    refuse_over_limit(api, owner.tenant, request)
    return owner.tenant


def refuse_over_limit(api: ApiState, tenant: str, request: Request) -> None:
    """429 with `Retry-After` past the tenant's rate limit; a request is counted once, even
    when a fast path declines it after counting it (`recoup.api.fast_route`)."""
    if api.limiter is None or request.scope.get(_RATE_COUNTED):
        return
    request.scope[_RATE_COUNTED] = True
    wait = api.limiter.wait(tenant)
    if wait > 0:
        raise ApiProblem(
            429,
            "rate-limited",
            f"tenant {tenant!r} is over its rate limit; retry after the delay given",
            headers={"Retry-After": retry_after(wait)},
        )


Tenant = Annotated[str, Depends(tenant_of)]


async def known_query(request: Request, tenant: Tenant) -> None:
    """400 for a query parameter the operation does not declare
    (`recoup.api.query_params`), once the bearer token has passed: an unauthenticated
    request gets its 401 first, as it does before FastAPI's own validation."""
    refuse_unknown_query(request)


async def posting(
    request: Request,
    api: Api,
    tenant: Tenant,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description=(
                'A unique key per request: bare (`abc-123`) or an RFC 8941 string (`"abc-123"`).'
            ),
            # Stated, not enforced here: `parse_key` answers a malformed key with its own 400.
            json_schema_extra={"pattern": KEY_HEADER_PATTERN},
        ),
    ] = None,
) -> PostContext:
    """A POST of `tenant`, run under its `Idempotency-Key` when it sends one."""
    return await post_context(
        request,
        tenant,
        idempotency_key,
        api.services.tables,
        api.clock,
        api.settings.idempotency_lock_timeout,
    )


Post = Annotated[PostContext, Depends(posting)]


def operator_of(
    api: Api,
    tenant: Tenant,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> Operator:
    """Who acts by hand through the API (retry, cancel, stop, mark paid): the bearer token's
    label, else its prefix, as the dashboard names the token that signed in."""
    token = credentials.credentials if credentials else ""  # `tenant` has checked it
    return Operator(tenant=tenant, who=token_name(api.services.tables.list_tokens(tenant), token))


Acting = Annotated[Operator, Depends(operator_of)]

__all__ = [
    "Acting",
    "Api",
    "Post",
    "Tenant",
    "api_state",
    "bearer",
    "known_query",
    "operator_of",
    "posting",
    "refuse_over_limit",
    "tenant_of",
]
