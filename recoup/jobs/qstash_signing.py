"""QStash's delivery headers: the `Upstash-Signature` JWT that QStash receivers verify (the
`qstash` SDK's `Receiver(current_signing_key=…, next_signing_key=…)`), for jobs published
through the QStash-compatible API (`HttpTarget.delivery == "qstash"`).

The JWT is HS256 with the claims QStash sets: `iss` "Upstash", `sub` the destination URL,
`body` the base64url SHA-256 of the exact body sent, `iat`/`nbf` the instant of sending, `exp`
five minutes later, and a random `jti` (upstash.com/docs/qstash/features/security). The
`Receiver` decodes it with the key string's UTF-8 bytes as the HMAC key.

**Keys.** A tenant's QStash signing keys are derived from its Standard Webhooks secrets, so
Recoup keeps one secret per tenant and one rotation (`recoup tenants rotate-secret`) for both
schemes: key = `sig_` + base64url(HMAC-SHA256(secret's bytes, "recoup qstash signing key
v1")). A derived key, not the `whsec_` secret itself, so each scheme has its own key (a
receiver given one cannot forge the other). QStash's pair is (current, next): it signs with
current, and a rotation makes next the current one. Recoup's rotation keeps the replaced
secret for an overlap instead, so during the overlap *current* is the replaced secret's key
(deliveries are still signed with it) and *next* the new secret's; when the overlap ends both
are the new secret's key. A receiver configured with both keys during the overlap verifies
every delivery across the switch, as QStash's own rotation promises.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import secrets as random_bytes
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final
from urllib.parse import quote

from recoup.jobs.model import Job
from recoup.timekeeping.instants import require_aware

SIGNATURE_LIFETIME: Final = timedelta(minutes=5)  # QStash's default `exp` - `iat`
_DERIVATION_LABEL: Final = b"recoup qstash signing key v1"
_JWT_HEADER: Final = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")


@dataclass(frozen=True, slots=True)
class QStashKeys:
    """A tenant's QStash signing keys, as `GET /v2/keys` answers them. Deliveries are signed
    with `current`."""

    current: str
    next: str


@functools.lru_cache(maxsize=256)
def derived_key(secret: str) -> str:
    """The QStash signing key of one `whsec_…` secret (see the module's "Keys")."""
    raw = base64.b64decode(secret.removeprefix("whsec_") + "==")
    digest = hmac.new(raw, _DERIVATION_LABEL, hashlib.sha256).digest()
    return "sig_" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def qstash_keys(signing_secrets: Sequence[str]) -> QStashKeys:
    """The pair for a tenant's secrets at an instant (`Tenant.signing_secrets(at)`: the current
    secret first, then the replaced one while a rotation's overlap lasts)."""
    if not signing_secrets:
        raise ValueError("a tenant signs with at least one secret")
    newest = derived_key(signing_secrets[0])
    if len(signing_secrets) > 1:  # a rotation's overlap: keep signing with the replaced key
        return QStashKeys(current=derived_key(signing_secrets[1]), next=newest)
    return QStashKeys(current=newest, next=newest)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def body_digest(body: str) -> str:
    """The `body` claim: base64url SHA-256 of the body's UTF-8 bytes (padded, as QStash sends
    it; the `Receiver` strips the padding before comparing)."""
    return base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).decode()


def upstash_signature(*, key: str, url: str, body: str, sent_at: datetime) -> str:
    """The `Upstash-Signature` JWT for `body` (the exact text sent) to `url`, signed with `key`
    at the real instant `sent_at` (receivers check `nbf`/`exp` against their own clock)."""
    issued = int(require_aware("sent_at", sent_at).astimezone(UTC).timestamp())
    claims = {
        "iss": "Upstash",
        "sub": url,
        "exp": issued + int(SIGNATURE_LIFETIME.total_seconds()),
        "nbf": issued,
        "iat": issued,
        "jti": "jwt_" + random_bytes.token_hex(12),
        "body": body_digest(body),
    }
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = _JWT_HEADER + b"." + payload.encode()
    mac = hmac.new(key.encode(), signing_input, hashlib.sha256).digest()
    return f"{signing_input.decode()}.{_b64url(mac)}"


def qstash_delivery_headers(job: Job) -> dict[str, str]:
    """What QStash tells a destination besides its signature (upstash.com/docs/qstash/howto/
    receiving): `Upstash-Message-Id`, `Upstash-Retried` (0 on the first attempt) and
    `Upstash-Schedule-Id` for a schedule's occurrence."""
    headers = {"Upstash-Message-Id": job.id, "Upstash-Retried": str(max(job.attempts - 1, 0))}
    if job.schedule_id is not None:
        headers["Upstash-Schedule-Id"] = quote(job.schedule_id, safe="")
    return headers


__all__ = [
    "SIGNATURE_LIFETIME",
    "QStashKeys",
    "body_digest",
    "derived_key",
    "qstash_delivery_headers",
    "qstash_keys",
    "upstash_signature",
]
