"""What every fast path of a POST reads before its operation (`recoup.api.fast_route`): the
cached token's owner, the `Idempotency-Key`, the W3C trace headers and the body validated once
by the operation's own model; or None for anything the declared route should answer itself
(no cached token, a query string, a content type other than JSON, a malformed header or body),
which then gets every dependency and problem+json it gets today."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from recoup.api.deps import refuse_over_limit
from recoup.api.idempotent import PostContext
from recoup.api.state import ApiState
from recoup.api.token_cache import CachedOwner
from recoup.errors import InvalidInput
from recoup.idempotency import fingerprint, parse_key
from recoup.jobs.trace_context import TraceContext, trace_context

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class FastPost(Generic[M]):
    """A POST the fast path may answer: its body, its context (whose guard checks the cached
    owner's epoch first), the owner and the request's trace context."""

    body: M
    ctx: PostContext
    owner: CachedOwner
    trace: TraceContext | None


def _json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of this type as JSON (the types a fast path takes)."""
    if content_type is None:
        return False
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json"


async def fast_post(request: Request, model: type[M]) -> FastPost[M] | None:
    """The request read as the declared route would read it, or None (see the module)."""
    api: ApiState = request.app.state.api
    headers = request.headers
    if request.scope.get("query_string") or not _json(headers.get("content-type")):
        return None  # refused (or read) by the full route's dependencies
    owner = api.tokens.cached(headers.get("authorization"))
    if owner is None or len(headers.getlist("authorization")) != 1:
        return None
    keys = headers.getlist("idempotency-key")
    try:
        key = parse_key(keys[0]) if len(keys) == 1 else None
        trace = trace_context(headers.get("traceparent"), headers.get("tracestate"))
    except InvalidInput:
        return None  # its 400 comes after the token's check, as the full route orders them
    if len(keys) > 1:
        return None
    raw = await request.body()
    try:
        body = model.model_validate(json.loads(raw))
    except (ValueError, RecursionError, ValidationError):
        return None  # the full route's 422 (or 400) names every field
    refuse_over_limit(api, owner.tenant, request)
    path = request.url.path  # as `post_context` fingerprints it: a retry may take either path
    ctx = PostContext(
        tenant=owner.tenant,
        key=key,
        fingerprint=fingerprint(request.method, path, raw),
        method=request.method,
        path=path,
        store=api.services.tables,
        clock=api.clock,
        lock_timeout=api.settings.idempotency_lock_timeout,
        guard=functools.partial(api.tokens.check, owner),
    )
    return FastPost(body, ctx, owner, trace)


__all__ = ["FastPost", "fast_post"]
