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
from recoup.idempotency import fingerprint_parsed, parse_key
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


# The request headers a fast path reads, by their name as the ASGI server gives it (lower case).
_READ = frozenset(
    (b"authorization", b"content-type", b"idempotency-key", b"traceparent", b"tracestate")
)


def _headers(raw: list[tuple[bytes, bytes]]) -> dict[bytes, str] | None:
    """The headers a fast path reads, decoded as Starlette decodes them (latin-1), in one pass
    over the request's headers (Starlette's `Headers.get` walks them all for each name). None
    when one of them is repeated: the full route says which wins, or refuses it."""
    found: dict[bytes, str] = {}
    for name, value in raw:
        if name in _READ:
            if name in found:
                return None
            found[name] = value.decode("latin-1")
    return found


async def fast_post(request: Request, model: type[M]) -> FastPost[M] | None:
    """The request read as the declared route would read it, or None (see the module)."""
    api: ApiState = request.app.state.api
    scope = request.scope
    # The path `post_context` fingerprints (`request.url.path`), which is the scope's own
    # unless it holds a character the URL escapes: a retry may take either path.
    path: str = scope["path"]
    if scope.get("query_string") or "?" in path or "#" in path or "\\" in path:
        return None  # refused (or read) by the full route's dependencies
    headers = _headers(scope["headers"])
    if headers is None or not _json(headers.get(b"content-type")):
        return None
    owner = api.tokens.cached(headers.get(b"authorization"))
    if owner is None:
        return None
    given = headers.get(b"idempotency-key")
    try:
        key = None if given is None else parse_key(given)
        trace = trace_context(headers.get(b"traceparent"), headers.get(b"tracestate"))
    except InvalidInput:
        return None  # its 400 comes after the token's check, as the full route orders them
    raw = await request.body()
    method = request.method
    try:
        parsed = json.loads(raw)
        body = model.model_validate(parsed)
        # The body parsed once for both (`fingerprint` parses it again); ValueError: a NaN,
        # which `fingerprint` hashes as bytes.
        digest = fingerprint_parsed(method, path, parsed)
    except (ValueError, RecursionError, ValidationError):
        return None  # the full route's 422 (or 400) names every field
    refuse_over_limit(api, owner.tenant, request)
    ctx = PostContext(
        tenant=owner.tenant,
        key=key,
        fingerprint=digest,
        method=method,
        path=path,
        store=api.services.tables,
        clock=api.clock,
        lock_timeout=api.settings.idempotency_lock_timeout,
        guard=functools.partial(api.tokens.check, owner),
    )
    return FastPost(body, ctx, owner, trace)


__all__ = ["FastPost", "fast_post"]
