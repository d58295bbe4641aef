"""Running one attempt of a job's target, and classifying what happened.

Outcome rules (issue 4):

| what happened                                   | outcome                           |
|-------------------------------------------------|-----------------------------------|
| 2xx                                             | succeeded                         |
| 408, 429, 5xx                                   | retry (honouring `Retry-After`)   |
| other 4xx, 1xx, 3xx (redirects are not followed) | failed, no retry                 |
| timeout, connection error, DNS failure          | retry                             |
| refused by the SSRF guard at send time          | failed, no retry                  |
| Python handler returned                         | succeeded                         |
| Python handler raised `PermanentError`          | failed, no retry                  |
| Python handler raised anything else             | retry                             |
| Python handler outlived the job's timeout       | retry (inline handlers: no limit) |
| no handler of that name in this process         | retry (another deploy may have it)|

"retry" becomes "failed" in the worker once the job's attempts are spent.

Redirects are not followed because a public target could otherwise redirect us to a private
address behind the SSRF guard's back.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import httpcore
import httpx

from recoup.jobs.backoff import parse_retry_after
from recoup.jobs.handlers import HandlerContext, HandlerRegistry, PermanentError
from recoup.jobs.model import ERROR_LIMIT, RESPONSE_EXCERPT_LIMIT, HttpTarget, Job
from recoup.jobs.signing import signature_headers
from recoup.jobs.ssrf import SsrfGuard, TargetRefused

USER_AGENT = "recoup/0.1"
_EXCERPT_BYTES = RESPONSE_EXCERPT_LIMIT * 4  # UTF-8 needs at most 4 bytes per character


class AttemptOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    RETRY = "retry"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """What one attempt produced, before the worker turns it into a logged run."""

    outcome: AttemptOutcome
    status_code: int | None = None
    duration_ms: float = 0.0
    response_excerpt: str | None = None
    error: str | None = None
    retry_after: timedelta | None = None


SUCCEEDED = AttemptResult(AttemptOutcome.SUCCEEDED)


def classify_status(status: int) -> AttemptOutcome:
    """2xx succeeds; 408, 429 and 5xx are retried; anything else fails without retry."""
    if 200 <= status < 300:
        return AttemptOutcome.SUCCEEDED
    if status in (408, 429) or 500 <= status < 600:
        return AttemptOutcome.RETRY
    return AttemptOutcome.FAILED


def classify_exception(exc: BaseException) -> AttemptOutcome:
    """Transport trouble (timeouts, refused or reset connections, DNS) is retried; a request
    that can never be sent (refused target, malformed URL) fails at once."""
    if isinstance(exc, TargetRefused | httpx.UnsupportedProtocol):
        return AttemptOutcome.FAILED
    if isinstance(exc, httpx.TransportError | TimeoutError | OSError):
        return AttemptOutcome.RETRY
    return AttemptOutcome.FAILED


def bounded(text: str | None, limit: int) -> str | None:
    """`text` cut to `limit` characters (with a trailing ellipsis when cut)."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def describe(exc: BaseException) -> str:
    message = str(exc)
    name = type(exc).__name__
    return bounded(f"{name}: {message}" if message else name, ERROR_LIMIT) or name


def encode_body(value: Any) -> tuple[str, str | None]:
    """The text sent for a body value, and the content type to send it with (None keeps the
    caller's): a str as is, None as empty, anything else as compact JSON."""
    if value is None:
        return "", None
    if isinstance(value, str):
        return value, None
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)
    return text, "application/json"


class GuardedNetworkBackend(httpcore.AsyncNetworkBackend):
    """The HTTP client's network backend, with the SSRF guard in front of every TCP connection:
    the host is resolved and checked here and the checked address connected to, while TLS
    still verifies the certificate against the host name (and the pool keys by name)."""

    def __init__(self, guard: SsrfGuard, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._guard = guard
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        address = await self._guard.resolve_host(host, port)
        return await self._inner.connect_tcp(
            address,
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise TargetRefused(path, "scheme", "unix sockets are not targets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def guarded_client(guard: SsrfGuard, *, max_connections: int = 100) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` whose every connection passes `guard` (see
    `GuardedNetworkBackend`); no redirects followed, no proxies from the environment (a proxy
    would connect on our behalf, out of the guard's sight)."""
    transport = httpx.AsyncHTTPTransport(trust_env=False)
    # httpx's transport takes no network backend: give it a pool built with ours.
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(trust_env=False),
        max_connections=max_connections,
        max_keepalive_connections=max_connections,
        keepalive_expiry=5.0,  # seconds, httpx's default
        network_backend=GuardedNetworkBackend(guard),
    )
    return httpx.AsyncClient(
        transport=transport, follow_redirects=False, trust_env=False, timeout=None
    )


class HttpExecutor:
    """Sends HTTP targets through one shared `httpx.AsyncClient` (connection pooling).

    Per attempt: SSRF check on the resolved address (and connection to that very address),
    the job's headers, the Standard Webhooks signature when the tenant has a secret, the
    `Idempotency-Key`, a total deadline of `job.timeout`, and a bounded response excerpt.
    `wall_clock` gives the signature's timestamp: receivers compare it with their real clock,
    so it must be real time even when the worker runs on a virtual clock."""

    def __init__(
        self,
        *,
        guard: SsrfGuard,
        wall_clock: Callable[[], datetime],
        client: httpx.AsyncClient | None = None,
        max_connections: int = 100,
    ) -> None:
        self.guard = guard
        self._wall_clock = wall_clock
        self._owns_client = client is None
        # Each attempt sets its own deadline (`job.timeout`), so the client has none.
        self.client = client or guarded_client(guard, max_connections=max_connections)

    async def aclose(self) -> None:
        if self._owns_client:
            await self.client.aclose()

    async def send(self, job: Job, *, secret: str | None) -> AttemptResult:
        """One attempt of `job`'s HTTP target. Never raises for the target's failures."""
        target = job.target
        assert isinstance(target, HttpTarget)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(job.timeout.total_seconds()):
                return await self._send(job, target, secret, started)
        except TimeoutError:
            return timed_out(job, started)
        except httpx.TimeoutException as exc:
            return AttemptResult(
                AttemptOutcome.RETRY, duration_ms=_ms_since(started), error=describe(exc)
            )
        except Exception as exc:
            return AttemptResult(
                classify_exception(exc), duration_ms=_ms_since(started), error=describe(exc)
            )

    async def _send(
        self, job: Job, target: HttpTarget, secret: str | None, started: float
    ) -> AttemptResult:
        body_value = target.body if target.body is not None else job.payload
        body, content_type = encode_body(body_value)
        headers = dict(target.headers)
        lower = {k.lower() for k in headers}
        if content_type and "content-type" not in lower:
            headers["Content-Type"] = content_type
        if "user-agent" not in lower:
            headers["User-Agent"] = USER_AGENT
        if job.idempotency_key is not None:
            headers["Idempotency-Key"] = job.idempotency_key
        if secret:
            headers.update(
                signature_headers(
                    secret=secret, message_id=job.id, timestamp=self._wall_clock(), body=body
                )
            )
        else:
            headers["webhook-id"] = job.id

        # Scheme and host here; the addresses when the client connects (GuardedNetworkBackend).
        self.guard.check_url(target.url, resolve=False)
        method = target.method.upper()
        request = self.client.build_request(
            method,
            target.url,
            headers=headers,
            content=body.encode() if body or method not in ("GET", "HEAD") else None,
        )
        response = await self.client.send(request, stream=True)
        try:
            excerpt = await _read_excerpt(response)
        finally:
            await response.aclose()
        outcome = classify_status(response.status_code)
        retry_after = None
        if outcome is AttemptOutcome.RETRY:
            retry_after = parse_retry_after(
                response.headers.get("retry-after"), now=self._wall_clock()
            )
        error = None if outcome is AttemptOutcome.SUCCEEDED else f"HTTP {response.status_code}"
        return AttemptResult(
            outcome,
            status_code=response.status_code,
            duration_ms=_ms_since(started),
            response_excerpt=excerpt,
            error=error,
            retry_after=retry_after,
        )


async def _read_excerpt(response: httpx.Response) -> str | None:
    """At most `RESPONSE_EXCERPT_LIMIT` characters of the body, reading no more than needed."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():  # decoded (gzip, br…), as the target meant it
        chunks.append(chunk)
        size += len(chunk)
        if size >= _EXCERPT_BYTES:
            break
    if not chunks:
        return None
    raw = b"".join(chunks)[:_EXCERPT_BYTES]
    encoding = response.charset_encoding or "utf-8"
    try:
        text = raw.decode(encoding, errors="replace")
    except LookupError:
        text = raw.decode("utf-8", errors="replace")
    return bounded(text, RESPONSE_EXCERPT_LIMIT)


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)


def timed_out(job: Job, started: float) -> AttemptResult:
    """The attempt outlived `job.timeout`: retried, like any timeout."""
    return AttemptResult(
        AttemptOutcome.RETRY,
        duration_ms=_ms_since(started),
        error=f"timed out after {job.timeout.total_seconds():g} s",
    )


def handler_context(job: Job) -> HandlerContext:
    return HandlerContext(
        job_id=job.id,
        tenant=job.tenant,
        name=job.name,
        attempt=job.attempts,
        payload=job.payload,
        idempotency_key=job.idempotency_key,
        run_at=job.run_at,
    )


def result_of_return(value: Any, started: float) -> AttemptResult:
    if value is None:
        return AttemptResult(AttemptOutcome.SUCCEEDED, duration_ms=_ms_since(started))
    return AttemptResult(
        AttemptOutcome.SUCCEEDED,
        duration_ms=_ms_since(started),
        response_excerpt=bounded(str(value), RESPONSE_EXCERPT_LIMIT),
    )


def result_of_exception(exc: BaseException, started: float) -> AttemptResult:
    outcome = AttemptOutcome.FAILED if isinstance(exc, PermanentError) else AttemptOutcome.RETRY
    return AttemptResult(outcome, duration_ms=_ms_since(started), error=describe(exc))


def missing_handler(name: str) -> AttemptResult:
    return AttemptResult(
        AttemptOutcome.RETRY, error=f"no handler named {name!r} is registered in this worker"
    )


async def run_handler(
    registry: HandlerRegistry, name: str, job: Job, *, bounded: bool = True
) -> AttemptResult:
    """One attempt of a Python handler (async, or sync in a thread). Never raises for the
    handler's failures; cancellation propagates.

    `job.timeout` bounds the attempt (a retryable "timed out after N s" when it runs out): an
    async handler is cancelled there; a sync handler's thread cannot be stopped, so the worker
    stops waiting for it and the thread runs on, unobserved, until the handler returns (it
    keeps one of the loop's default-executor threads, and the process does not exit before it
    returns). An inline handler runs on the loop and cannot be interrupted: the timeout does
    not apply to it (see `HandlerRegistry.add`). `bounded=False` leaves an async handler's
    timeout to the caller (the worker's consumers enforce it without a timer per attempt)."""
    registered = registry.get(name)
    if registered is None:
        return missing_handler(name)
    ctx = handler_context(job)
    started = time.perf_counter()
    if registered.inline or (registered.is_async and not bounded):
        try:
            value = await registered.fn(ctx) if registered.is_async else registered.fn(ctx)
        except Exception as exc:
            return result_of_exception(exc, started)
        return result_of_return(value, started)
    deadline = asyncio.timeout(job.timeout.total_seconds())
    try:
        async with deadline:
            if registered.is_async:
                value = await registered.fn(ctx)
            else:
                value = await asyncio.to_thread(registered.fn, ctx)
    except Exception as exc:
        if deadline.expired():  # ours, not a TimeoutError the handler raised itself
            return timed_out(job, started)
        return result_of_exception(exc, started)
    if deadline.expired():  # the handler swallowed the cancellation and returned late
        return timed_out(job, started)
    return result_of_return(value, started)


def run_inline(registry: HandlerRegistry, name: str, job: Job) -> AttemptResult | None:
    """Run an inline (sync, cheap) handler right here; None if `name` is not inline."""
    registered = registry.get(name)
    if registered is None or not registered.inline:
        return None
    started = time.perf_counter()
    try:
        value = registered.fn(handler_context(job))
    except Exception as exc:
        return result_of_exception(exc, started)
    if value is None:
        return SUCCEEDED  # the common no-op case: no allocation, no timing
    return result_of_return(value, started)


__all__ = [
    "SUCCEEDED",
    "AttemptOutcome",
    "AttemptResult",
    "GuardedNetworkBackend",
    "HttpExecutor",
    "bounded",
    "classify_exception",
    "classify_status",
    "encode_body",
    "guarded_client",
    "run_handler",
    "run_inline",
]
