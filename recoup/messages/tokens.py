"""Update-card tokens: the `{token}` of a tenant's update-card link, which the tenant's app
verifies to let a customer replace their card without logging in.

A token names the tenant, the customer and the invoice (none for a renewal reminder) and the
instant it expires, signed with HMAC-SHA256:

    rut1.<base64url of the claims' JSON>.<base64url of the MAC>

The MAC's key is derived from the tenant's signing secret (the `whsec_…` secret the app
already holds to verify Recoup's webhooks): HMAC-SHA256(the secret's bytes, "recoup update
token key v1"). A derived key, not the secret itself, so a token can never be replayed as a
webhook signature or a QStash key (each scheme has its own key: `jobs.qstash_signing` does the
same). The MAC covers the prefix and the claims exactly as sent, so no claim can be changed,
added or removed. Verifying takes a list of secrets while a rotation's overlap lasts: a link
sent before `recoup tenants rotate-secret` keeps working with the old secret beside the new.

A token is a bearer credential for one customer's card page until it expires: it cannot be
forged without the secret, used after `expires_at`, or presented for another customer (the
app passes the customer it is about to change as `customer_id`). Tokens are URL-safe (base64url
and dots), so they go into a link as they are. Standard library only: the core install and
users' apps verify them without an extra.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from recoup.errors import InvalidInput, RecoupError
from recoup.timekeeping.instants import require_aware

PREFIX: Final = "rut1"  # Recoup update token, format 1
_LABEL: Final = b"recoup update token key v1"
_MAX_LENGTH: Final = 2048  # characters: a token is ~150; anything longer is not one of ours
_MAX_ID: Final = 255  # characters in a tenant, customer or invoice id


class TokenProblem(StrEnum):
    MALFORMED = "malformed"  # not a token of this format at all
    BAD_SIGNATURE = "bad_signature"  # not signed with any of the secrets: forged or altered
    EXPIRED = "expired"  # signed, but its time is up
    ANOTHER_CUSTOMER = "another_customer"  # signed for a customer other than the one asked


class InvalidUpdateToken(RecoupError):
    """An update-card token that must not be honoured; `problem` says why. Answer the customer
    with a fresh link (or a login), never with the page."""

    http_status = 403

    def __init__(self, problem: TokenProblem, detail: str) -> None:
        self.problem = problem
        super().__init__(f"update token {problem.value}: {detail}")


@dataclass(frozen=True, kw_only=True)
class UpdateToken:
    """What a verified token names."""

    tenant: str
    customer_id: str
    invoice_id: str | None
    expires_at: datetime  # UTC, whole seconds


def issue_update_token(
    secret: str, *, tenant: str, customer_id: str, invoice_id: str | None, expires_at: datetime
) -> str:
    """A token for `customer_id` of `tenant` (about `invoice_id`), valid until `expires_at`
    (kept to the second), signed with a key derived from `secret`."""
    require_aware("expires_at", expires_at)
    for field, value in (("tenant", tenant), ("customer_id", customer_id)):
        _check_id(field, value)
    if invoice_id is not None:
        _check_id("invoice_id", invoice_id)
    claims = {"t": tenant, "c": customer_id, "i": invoice_id, "e": int(expires_at.timestamp())}
    body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    signed = f"{PREFIX}.{body}"
    return f"{signed}.{_b64(_mac(_key(secret), signed))}"


def verify_update_token(
    token: str,
    secret: str | Sequence[str],
    *,
    now: datetime | None = None,
    customer_id: str | None = None,
) -> UpdateToken:
    """The claims of `token` if it was signed with `secret` (or any of several, while
    rotating), has not expired at `now` (the system clock when not given: the one place this
    module reads it, for apps that have no clock of their own) and, when `customer_id` is
    given, names that customer. Otherwise `InvalidUpdateToken`, saying which."""
    keys = [_key(s) for s in ((secret,) if isinstance(secret, str) else tuple(secret))]
    if not keys:
        raise InvalidInput("secret", [], "expected at least one whsec_… secret")
    at = datetime.now(UTC) if now is None else require_aware("now", now)
    if (
        not isinstance(token, str)
        or len(token) > _MAX_LENGTH
        or not token.isascii()
        or token.count(".") != 2
    ):
        raise InvalidUpdateToken(TokenProblem.MALFORMED, "expected rut1.<claims>.<signature>")
    prefix, body, signature = token.split(".")
    if prefix != PREFIX:
        raise InvalidUpdateToken(TokenProblem.MALFORMED, f"expected the prefix {PREFIX}")
    given = _unb64(signature)
    signed = f"{prefix}.{body}"
    # Only the canonical spelling of a MAC: base64 has spare bits in its last character, and
    # a second spelling of the same token would be a token nobody issued.
    if (
        given is None
        or _b64(given) != signature
        or not any(hmac.compare_digest(_mac(k, signed), given) for k in keys)
    ):
        raise InvalidUpdateToken(TokenProblem.BAD_SIGNATURE, "not signed with the secret")
    found = _claims(body)  # signed by us: well formed unless the format itself changed
    if found.expires_at <= at:
        raise InvalidUpdateToken(TokenProblem.EXPIRED, f"expired at {found.expires_at.isoformat()}")
    if customer_id is not None and not hmac.compare_digest(
        found.customer_id.encode(), customer_id.encode()
    ):
        raise InvalidUpdateToken(TokenProblem.ANOTHER_CUSTOMER, "issued for another customer")
    return found


def _claims(body: str) -> UpdateToken:
    raw = _unb64(body)
    try:
        data: Any = json.loads(raw) if raw is not None else None
        tenant, customer, invoice, expires = data["t"], data["c"], data["i"], data["e"]
        if not (
            isinstance(tenant, str)
            and isinstance(customer, str)
            and (invoice is None or isinstance(invoice, str))
            and isinstance(expires, int)
        ):
            raise TypeError
        expires_at = datetime.fromtimestamp(expires, UTC)
    except (ValueError, TypeError, KeyError, OverflowError, OSError):
        raise InvalidUpdateToken(TokenProblem.MALFORMED, "claims unreadable") from None
    return UpdateToken(
        tenant=tenant, customer_id=customer, invoice_id=invoice, expires_at=expires_at
    )


def _check_id(field: str, value: Any) -> None:
    if not isinstance(value, str) or not value or len(value) > _MAX_ID:
        raise InvalidInput(field, value, f"expected a non-empty id of at most {_MAX_ID} characters")


@functools.lru_cache(maxsize=256)
def _key(secret: str) -> bytes:
    if not isinstance(secret, str):
        raise InvalidInput("secret", "(hidden)", "expected a whsec_… secret")
    try:
        raw = base64.b64decode(secret.removeprefix("whsec_") + "==", validate=False)
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:
        # Never repeat the secret in an error.
        raise InvalidInput("secret", "(hidden)", "expected whsec_ followed by base64")
    return hmac.new(raw, _LABEL, hashlib.sha256).digest()


def _mac(key: bytes, signed: str) -> bytes:
    return hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes | None:
    if not text or not text.isascii():
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


__all__ = [
    "PREFIX",
    "InvalidUpdateToken",
    "TokenProblem",
    "UpdateToken",
    "issue_update_token",
    "verify_update_token",
]
