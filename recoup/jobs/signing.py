"""Outbound signatures: Standard Webhooks (`webhook-id`, `webhook-timestamp`,
`webhook-signature`), so receivers verify our requests with any Standard Webhooks library.

`webhook-id` is the job's id, the same on every retry of that job: the spec asks for an id
that identifies the message, not the attempt, so receivers can deduplicate on it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Final, Protocol

from recoup.timekeeping.instants import require_aware

SIGNING_SECRET_BYTES: Final = 24  # random bytes in a signing secret


def new_signing_secret() -> str:
    """A Standard Webhooks secret: `whsec_` + base64 of random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(SIGNING_SECRET_BYTES)).decode()


class _Signer:
    """Standard Webhooks' `v1` signature of one secret: base64 of HMAC-SHA256 over
    `{id}.{timestamp}.{body}`, exactly what `standardwebhooks.Webhook.sign` computes (a test
    verifies ours with that library), with the key's HMAC state prepared once and copied per
    request instead of set up again (a third of the cost of signing a small body)."""

    __slots__ = ("_keyed",)

    def __init__(self, secret: str) -> None:
        # As the library reads a secret: `whsec_` optional, base64 padding optional.
        key = base64.b64decode(secret.removeprefix("whsec_") + "==")
        if not key:
            raise ValueError("a signing secret may not be empty")
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)

    def sign(self, *, msg_id: str, timestamp: int, data: str) -> str:
        """`timestamp` in whole seconds since the epoch, as the header carries it."""
        mac = self._keyed.copy()
        mac.update(f"{msg_id}.{timestamp}.{data}".encode())
        return "v1," + base64.b64encode(mac.digest()).decode()


class SigningKeys(Protocol):
    """What signs a tenant's requests (a `recoup.jobs.model.Tenant` is one): its secret, and
    the one a rotation replaced while their overlap lasts."""

    def signing_secrets(self, at: datetime) -> tuple[str, ...]:
        """The secrets that sign a request sent at `at`, the current one first."""
        ...


@functools.lru_cache(maxsize=256)
def _webhook(secret: str) -> _Signer:
    # Decoding the base64 secret once per tenant, not once per request.
    return _Signer(secret)


def signature_headers(
    *, secret: str | Sequence[str], message_id: str, timestamp: datetime, body: str
) -> dict[str, str]:
    """The three Standard Webhooks headers for `body` (the exact text sent), signed with the
    tenant's `whsec_…` secret, or with each of several while a rotation's overlap lasts
    (`webhook-signature` then lists one `v1,…` entry per secret, space-separated, as the spec
    allows: a receiver accepts the request if any entry matches a secret it holds).
    `timestamp` is the real instant of sending (receivers reject timestamps more than five
    minutes from their own clock)."""
    seconds = int(require_aware("timestamp", timestamp).timestamp())  # the same in any zone
    if isinstance(secret, str):  # one secret: the usual case, every request of a worker
        signature = _webhook(secret).sign(msg_id=message_id, timestamp=seconds, data=body)
    else:
        signature = " ".join(
            _webhook(s).sign(msg_id=message_id, timestamp=seconds, data=body) for s in secret
        )
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(seconds),
        "webhook-signature": signature,
    }


__all__ = ["SIGNING_SECRET_BYTES", "SigningKeys", "new_signing_secret", "signature_headers"]
