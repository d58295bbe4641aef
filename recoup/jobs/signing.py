"""Outbound signatures: Standard Webhooks (`webhook-id`, `webhook-timestamp`,
`webhook-signature`), so receivers verify our requests with any Standard Webhooks library.

`webhook-id` is the job's id, the same on every retry of that job: the spec asks for an id
that identifies the message, not the attempt, so receivers can deduplicate on it.
"""

from __future__ import annotations

import base64
import functools
import secrets
from datetime import UTC, datetime
from typing import Final

from standardwebhooks import Webhook

from recoup.timekeeping.instants import require_aware

SIGNING_SECRET_BYTES: Final = 24  # random bytes in a signing secret


def new_signing_secret() -> str:
    """A Standard Webhooks secret: `whsec_` + base64 of random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(SIGNING_SECRET_BYTES)).decode()


@functools.lru_cache(maxsize=256)
def _webhook(secret: str) -> Webhook:
    # Decoding the base64 secret once per tenant, not once per request.
    return Webhook(secret)


def signature_headers(
    *, secret: str, message_id: str, timestamp: datetime, body: str
) -> dict[str, str]:
    """The three Standard Webhooks headers for `body` (the exact text sent), signed with the
    tenant's `whsec_…` secret. `timestamp` is the real instant of sending (receivers reject
    timestamps more than five minutes from their own clock)."""
    instant = require_aware("timestamp", timestamp).astimezone(UTC)
    signature = _webhook(secret).sign(msg_id=message_id, timestamp=instant, data=body)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(instant.timestamp())),
        "webhook-signature": signature,
    }


__all__ = ["SIGNING_SECRET_BYTES", "new_signing_secret", "signature_headers"]
