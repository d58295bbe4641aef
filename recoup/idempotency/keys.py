"""Idempotency keys (IETF draft "The Idempotency-Key HTTP Header Field", Stripe's practice).

The first request with a key is processed and its response stored with a fingerprint of the
request; a later request with the same key and the same fingerprint gets the stored response;
a different fingerprint is a `Mismatch`; a request that arrives while the first is still being
processed is `InProgress`. Keys are scoped per tenant (the draft's "composite lookup key", so one
tenant can never read another's cached response) and the UNIQUE (tenant, key) constraint of
the backing table decides a race between concurrent first requests.

Retention: a key is kept `DEFAULT_RETENTION` (24 hours, Stripe's floor) after its first use and
then pruned; a key reused after pruning is a new request: it runs again. What it creates is
named by the key *and* the request's fingerprint (`operation_key`, `derived_id`), so:

- the same request again (same method, path and body) finds what the first one created, while
  that still exists (a job keeps its key until it is pruned itself): retrying late never
  duplicates work;
- a different request under a pruned key creates something new, as a new request should; it
  never gets the old request's result back.

Crashes: an in-flight key whose lock is older than `DEFAULT_LOCK_TIMEOUT` is taken to belong to
a process that died mid-request, and the next request with it proceeds (`New`). The operations
behind a key are themselves idempotent by design (a job carries `operation_key`, a schedule's id
is `derived_id`), so re-running one after a crash, or after a 5xx freed the key, finds what the
first run committed instead of doing it twice. Each `New` carries its lock (`locked_at`), and
`complete` and `release` act only while the lock is still theirs: a request whose key was taken
over cannot overwrite or free the taker's.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from recoup.errors import InvalidInput

DEFAULT_RETENTION = timedelta(hours=24)
DEFAULT_LOCK_TIMEOUT = timedelta(seconds=60)  # an in-flight key older than this is abandoned
MAX_KEY_LENGTH = 255  # characters, as Stripe allows

T = TypeVar("T")

# Printable ASCII without space, quote or backslash: what fits an RFC 8941 sf-string without
# escapes and an RFC 9110 header value alike. UUIDs, ULIDs and Stripe-style keys all fit.
_KEY = rf"[!#-\[\]-~]{{1,{MAX_KEY_LENGTH}}}"
# The whole header value, bare or quoted: what `parse_key` accepts and what the API's OpenAPI
# document states for the header (one pattern, so the two cannot drift).
KEY_HEADER_PATTERN = rf'^(?:{_KEY}|"{_KEY}")$'
KEY_PATTERN = rf"^{_KEY}$"  # a key alone, as a body field carries one
KEY_RULE = (
    f"expected 1–{MAX_KEY_LENGTH} printable ASCII characters without spaces, quotes or backslashes"
)
_KEY_HEADER = re.compile(KEY_HEADER_PATTERN)


@dataclass(frozen=True, kw_only=True)
class New:
    """The key was free (or abandoned): process the request, then `complete` or `release`
    with `locked_at`, the lock this request holds (the instant it claimed or took it over)."""

    locked_at: datetime


@dataclass(frozen=True, kw_only=True)
class Replay:
    """The key's first request completed: answer its stored status and body."""

    status: int
    body: bytes
    content_type: str


@dataclass(frozen=True, kw_only=True)
class InProgress:
    """The key's first request is still being processed: answer 409 with Retry-After."""

    retry_after: int  # seconds


@dataclass(frozen=True, kw_only=True)
class Mismatch:
    """The key was first used for another request (method, path or body): answer 422."""


Outcome = New | Replay | InProgress | Mismatch


class IdempotencyStore(Protocol):
    """Stored idempotency keys. Implemented by each storage backend's `api_tables` module."""

    def begin(
        self,
        *,
        tenant: str,
        key: str,
        fingerprint: str,
        method: str,
        path: str,
        now: datetime,
        lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
    ) -> Outcome:
        """Claim `key` for this request, or say why not. A fingerprint different from the
        stored one is a `Mismatch`, whatever the state of the first request."""
        ...

    def complete(
        self,
        *,
        tenant: str,
        key: str,
        locked_at: datetime,
        status: int,
        body: bytes,
        content_type: str,
    ) -> None:
        """Store the response of the request that holds `key` under the lock `locked_at` (its
        `New`), and unlock it. Nothing happens if the lock is no longer that one (taken over)."""
        ...

    def release(self, *, tenant: str, key: str, locked_at: datetime) -> None:
        """Forget an in-flight key (the request failed before a result worth keeping), so a
        retry with the same key runs afresh. Only under the caller's lock `locked_at`: a key
        taken over by another request, or completed, is left alone."""
        ...

    def prune_keys(self, *, older_than: datetime, limit: int = 10_000) -> int:
        """Delete keys first used before `older_than`; return how many."""
        ...

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run `fn` as one transaction of the database these keys live in: its `begin`, its
        `complete` and the writes of the operation between them (through the same store)
        commit together when it returns, or not at all if it raises (the claim included: a
        failed request leaves its key free, with no stale lock)."""
        ...


def parse_key(header: str) -> str:
    """The key of an `Idempotency-Key` header value.

    The draft makes the value an RFC 8941 sf-string (`"8e03978e-…"`); Stripe's clients, and most
    others, send a bare token (`8e03978e-…`). Both are accepted and mean the same key. The key
    itself is 1–255 printable ASCII characters without space, `"` or `\\`.
    """
    text = header.strip()
    if not _KEY_HEADER.fullmatch(text):
        raise InvalidInput(
            "Idempotency-Key",
            header,
            f'{KEY_RULE}, bare or as a quoted string (e.g. "8e03978e-40d5-43e8-bc93-...")',
        )
    return text.removeprefix('"').removesuffix('"')


# Namespace of `derived_id` (a uuid5 of this text under the URL namespace; any fixed UUID works).
_DERIVED_IDS = uuid.uuid5(uuid.NAMESPACE_URL, "https://recoup.invalid/idempotency")


def operation_key(key: str, fingerprint: str) -> str:
    """The idempotency key stored with what a request under `key` creates (a job): the key and
    the request's fingerprint, so a pruned key reused for another request is a new operation
    (see the module docstring), while the same request retried finds the first one's result."""
    return f"{key}#{fingerprint[:32]}"


def derived_id(kind: str, tenant: str, key: str, fingerprint: str) -> str:
    """A UUID (version 5) for the `kind` of record ("schedule") that the request under `key` of
    `tenant`, with this fingerprint, creates: a retry of it computes the same id and finds the
    record instead of creating a second one."""
    return str(uuid.uuid5(_DERIVED_IDS, "\x00".join((kind, tenant, key, fingerprint))))


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no insignificant whitespace: one text per value."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def fingerprint(method: str, path: str, body: bytes) -> str:
    """A field-value fingerprint of a request: sha256 over the method, the path and the body.

    A JSON body is hashed in canonical form, so two bodies with the same fields and values in
    another order or spacing match (a retrying client may re-serialise its payload). Numbers
    compare as JSON parses them (`1` and `1.0` differ). A body that is not JSON is hashed as
    bytes. The query string is not part of it (our POSTs take none).
    """
    try:
        normalised = canonical_json(json.loads(body)) if body.strip() else b""
    except (ValueError, RecursionError):
        normalised = body
    return _digest(method, path, normalised)


def fingerprint_parsed(method: str, path: str, parsed: Any) -> str:
    """`fingerprint` of a request whose body is JSON already parsed as `parsed` (what a body
    that `json.loads` read gives, not empty): the same digest, without parsing it again."""
    return _digest(method, path, canonical_json(parsed))


def _digest(method: str, path: str, normalised: bytes) -> str:
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode(), normalised):
        digest.update(len(part).to_bytes(8, "big"))  # length-prefixed: no ambiguous joins
        digest.update(part)
    return digest.hexdigest()
