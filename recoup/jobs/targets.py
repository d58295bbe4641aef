"""Running one attempt of a job's HTTP target, and classifying what happened (a Python
handler's attempt: `handler_attempts`, by the same rules).

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

import functools
import json
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import quote

import aiohttp
import certifi
from aiohttp.abc import AbstractResolver, ResolveResult
from multidict import CIMultiDict
from yarl import URL

from recoup.jobs.backoff import parse_retry_after
from recoup.jobs.model import ERROR_LIMIT, RESPONSE_EXCERPT_LIMIT, HttpTarget, Job
from recoup.jobs.qstash_signing import qstash_delivery_headers, qstash_keys, upstash_signature
from recoup.jobs.signing import SigningKeys, signature_headers
from recoup.jobs.ssrf import SsrfGuard, TargetRefused

USER_AGENT = "recoup/0.1"
QSTASH_USER_AGENT = "Upstash-QStash"  # what QStash's deliveries say they are
_CHECKED_URLS = 4096  # URLs remembered as checked (see HttpExecutor._check), then forgotten
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
    if isinstance(exc, TargetRefused | aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        return AttemptOutcome.FAILED
    if isinstance(exc, aiohttp.ClientError | TimeoutError | OSError):
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
    return _COMPACT_JSON.encode(value), "application/json"


# One encoder for every body (json.dumps with options builds a new one per call).
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=False)


class GuardedResolver(AbstractResolver):
    """The HTTP client's resolver, with the SSRF guard in front of every TCP connection: the
    connector asks it for a host's addresses when it opens a connection, and it answers only
    addresses the guard checked (all of them, or `TargetRefused`), so the address connected to
    is a checked one, while TLS still verifies the certificate against the host name (and the
    pool keys by name). aiohttp's DNS cache holds these answers only. Address literals never
    reach a resolver: `HttpExecutor` checks them itself before sending."""

    def __init__(self, guard: SsrfGuard) -> None:
        self._guard = guard

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = await self._guard.resolve(host, port, family=family)
        return [
            {
                "hostname": host,
                "host": str(ip),
                "port": port,
                "family": socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            }
            for ip in addresses
        ]

    async def close(self) -> None:
        pass


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every guarded client verifies with (host names checked, certifi's CA
    bundle), built once per process: loading the bundle takes milliseconds, which a client
    made for a single request (the dunning runtime's charge requests) paid every time. A
    context is safe to share between clients, threads and event loops."""
    return ssl.create_default_context(cafile=certifi.where())


def guarded_client(guard: SsrfGuard, *, max_connections: int = 100) -> aiohttp.ClientSession:
    """An `aiohttp.ClientSession` whose every connection passes `guard` (see
    `GuardedResolver`), pooling at most `max_connections` connections; no proxies from the
    environment (a proxy would connect on our behalf, out of the guard's sight), no cookies
    kept between requests (one tenant's target must not see another's). Redirects are refused
    per request (`HttpExecutor`). Create it on the event loop it will run on."""
    connector = aiohttp.TCPConnector(
        resolver=GuardedResolver(guard),
        limit=max_connections,
        limit_per_host=0,
        keepalive_timeout=5.0,  # seconds, as httpx's pool had
        ssl=tls_context(),  # verifies the host name
    )
    return aiohttp.ClientSession(
        connector=connector,
        trust_env=False,
        timeout=aiohttp.ClientTimeout(total=None),  # each attempt has its own deadline
        cookie_jar=aiohttp.DummyCookieJar(),
    )


def delivery_headers(job: Job) -> dict[str, str]:
    """What a receiver learns about the delivery, on every attempt: `Idempotency-Key` (the
    job's own key, else its id, which every retry of the job keeps, and which differs for each
    occurrence of a schedule), `Recoup-Job-Id`, `Recoup-Attempt` (1 for the first),
    `Recoup-Job-Name` (percent-encoded UTF-8) and `Recoup-Schedule-Id` when the job has them;
    `traceparent` and `tracestate` (W3C Trace Context) when the job was created with them."""
    headers = {
        "Idempotency-Key": job.idempotency_key or job.id,
        "Recoup-Job-Id": job.id,
        "Recoup-Attempt": str(job.attempts),
    }
    if job.name is not None:
        headers["Recoup-Job-Name"] = quote(job.name, safe="")
    if job.schedule_id is not None:
        headers["Recoup-Schedule-Id"] = quote(job.schedule_id, safe="")
    if job.trace is not None:
        headers.update(job.trace.headers())
    return headers


class HttpExecutor:
    """Sends HTTP targets through one shared `aiohttp.ClientSession` (connection pooling).

    aiohttp, not httpx: on one loopback receiver httpx's async client reached 225–470
    requests/s (encode/httpx#3215) and aiohttp about 6,700 (`bench/bench_http.py`, 2 cores).

    Per attempt: SSRF check on the resolved address (and connection to that very address),
    the job's headers, the Standard Webhooks signature when the tenant has a secret (and, for
    `delivery="qstash"`, QStash's `Upstash-Signature` and `qstash_delivery_headers`), the
    delivery headers (`delivery_headers`), a total deadline of `job.timeout`, and a bounded
    response excerpt.
    `wall_clock` gives the signature's timestamp: receivers compare it with their real clock,
    so it must be real time even when the worker runs on a virtual clock.

    Build it on the event loop it sends from (an aiohttp session belongs to one loop). A
    `session` given is used as is and not closed (tests); by default the executor opens a
    `guarded_client` and closes it in `aclose()`."""

    def __init__(
        self,
        *,
        guard: SsrfGuard,
        wall_clock: Callable[[], datetime],
        session: aiohttp.ClientSession | None = None,
        max_connections: int = 100,
    ) -> None:
        self.guard = guard
        self._wall_clock = wall_clock
        self._owns_session = session is None
        self.session = session or guarded_client(guard, max_connections=max_connections)
        self._checked: dict[str, URL] = {}  # URLs that passed the checks needing no DNS

    async def _check(self, raw: str) -> URL:
        """The URL to send to, after the checks that need no DNS: scheme and host here, the
        addresses of a name when the client connects (GuardedResolver). What aiohttp takes for
        an address literal it connects to without asking a resolver: that host is checked
        here, as aiohttp's connector will see it. Remembered per URL (the answer depends on
        nothing else), so a busy target is parsed and checked once, not once per attempt."""
        self.guard.check_url(raw, resolve=False)
        url = URL(raw)
        host = url.raw_host
        if host is not None and (":" in host or host.replace(".", "").isdigit()):
            await self.guard.resolve(host, url.port or 0)  # a true literal: checked, no lookup
        if len(self._checked) >= _CHECKED_URLS:
            self._checked.clear()
        self._checked[raw] = url
        return url

    async def aclose(self) -> None:
        if self._owns_session:
            await self.session.close()

    async def send(
        self, job: Job, *, secret: str | SigningKeys | None, deadline: bool = True
    ) -> AttemptResult:
        """One attempt of `job`'s HTTP target, signed with `secret` (one, or a tenant's keys:
        every secret that signs at the instant of sending). Never raises for the target's
        failures. `deadline=False`: the caller bounds the attempt by `job.timeout` itself
        (the worker: one timer for all its attempts, `Runner`), so the request runs under
        no timer of its own (aiohttp's costs a tenth of a small request's CPU)."""
        target = job.target
        assert isinstance(target, HttpTarget)
        started = time.perf_counter()
        try:
            return await self._send(job, target, secret, started, deadline)
        except TimeoutError:  # the request's own deadline (see `_send`)
            return timed_out(job, started)
        except Exception as exc:
            return AttemptResult(
                classify_exception(exc), duration_ms=ms_since(started), error=describe(exc)
            )

    async def _send(
        self,
        job: Job,
        target: HttpTarget,
        secret: str | SigningKeys | None,
        started: float,
        deadline: bool,
    ) -> AttemptResult:
        body_value = target.body if target.body is not None else job.payload
        body, content_type = encode_body(body_value)
        # Case-insensitive, and what aiohttp works on: it takes it without converting a dict.
        # (The job's own headers cannot name a header set below: `check_headers` reserves them.)
        headers: CIMultiDict[str] = CIMultiDict(target.headers)
        labelled = "Content-Type" in headers
        if content_type and not labelled:
            headers["Content-Type"] = content_type
            labelled = True
        qstash = target.delivery == "qstash"
        if "User-Agent" not in headers:
            headers["User-Agent"] = QSTASH_USER_AGENT if qstash else USER_AGENT
        sent = delivery_headers(job)
        if "traceparent" in sent:  # the job's trace context replaces any of the target's own
            for name in [n for n in headers if n.lower() in ("traceparent", "tracestate")]:
                del headers[name]
        headers.update(sent)
        if secret:
            sent_at = self._wall_clock()
            keys = (secret,) if isinstance(secret, str) else secret.signing_secrets(sent_at)
            headers.update(
                signature_headers(
                    secret=keys[0] if len(keys) == 1 else keys,
                    message_id=job.id,
                    timestamp=sent_at,
                    body=body,
                )
            )
            if qstash:
                headers["Upstash-Signature"] = upstash_signature(
                    key=qstash_keys(keys).current, url=target.url, body=body, sent_at=sent_at
                )
        else:
            headers["webhook-id"] = job.id
        if qstash:
            headers.update(qstash_delivery_headers(job))

        url = self._checked.get(target.url)
        if url is None:
            url = await self._check(target.url)
        method = target.method.upper()
        data = body.encode() if body or method not in ("GET", "HEAD") else None
        async with self.session.request(
            method,
            url,
            headers=headers,
            data=data,
            allow_redirects=False,
            # aiohttp's slow path (a header set built per request), only when it would label
            # the body itself: a JSON body or the job's own header already says what it is.
            skip_auto_headers=None if labelled or data is None else _NO_AUTO_HEADERS,
            # The job's deadline over the whole request, the guarded DNS look-up, the
            # connection and the reading of the response excerpt included: aiohttp's own timer
            # (a TimeoutError), not a second `asyncio.timeout` scope around it; or none, when
            # the caller keeps the deadline (and none of the session's own either).
            timeout=_timeout(job.timeout.total_seconds()) if deadline else _UNBOUNDED,
        ) as response:
            excerpt = await _read_excerpt(response)
        outcome = classify_status(response.status)
        retry_after = None
        if outcome is AttemptOutcome.RETRY:
            retry_after = parse_retry_after(
                response.headers.get("retry-after"), now=self._wall_clock()
            )
        error = None if outcome is AttemptOutcome.SUCCEEDED else f"HTTP {response.status}"
        return AttemptResult(
            outcome,
            status_code=response.status,
            duration_ms=ms_since(started),
            response_excerpt=excerpt,
            error=error,
            retry_after=retry_after,
        )


_UNBOUNDED = aiohttp.ClientTimeout(total=None)  # no timer at all (see `send`'s `deadline`)


@functools.lru_cache(maxsize=64)
def _timeout(seconds: float) -> aiohttp.ClientTimeout:
    """One (immutable) timeout object per job timeout, not one per request."""
    return aiohttp.ClientTimeout(total=seconds)


# aiohttp would label a body sent without a Content-Type as application/octet-stream: send
# none, as the job asked (its own header, or JSON's, still goes).
_NO_AUTO_HEADERS = ("Content-Type",)


async def _read_excerpt(response: aiohttp.ClientResponse) -> str | None:
    """At most `RESPONSE_EXCERPT_LIMIT` characters of the body, reading no more than needed."""
    chunks: list[bytes] = []
    size = 0
    content = response.content
    # at_eof: the whole body is read (a small one usually arrives with the headers), so no
    # further read is awaited only to learn that it ended.
    while size < _EXCERPT_BYTES and not content.at_eof():
        chunk = await content.read(_EXCERPT_BYTES - size)  # decoded (gzip, br…)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if not chunks:
        return None
    raw = b"".join(chunks)
    encoding = response.charset or "utf-8"
    try:
        text = raw.decode(encoding, errors="replace")
    except LookupError:
        text = raw.decode("utf-8", errors="replace")
    return bounded(text, RESPONSE_EXCERPT_LIMIT)


def ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)


def timed_out(job: Job, started: float) -> AttemptResult:
    """The attempt outlived `job.timeout`: retried, like any timeout."""
    return AttemptResult(
        AttemptOutcome.RETRY,
        duration_ms=ms_since(started),
        error=f"timed out after {job.timeout.total_seconds():g} s",
    )


__all__ = [
    "SUCCEEDED",
    "AttemptOutcome",
    "AttemptResult",
    "GuardedResolver",
    "HttpExecutor",
    "bounded",
    "classify_exception",
    "classify_status",
    "encode_body",
    "guarded_client",
    "ms_since",
    "timed_out",
]
