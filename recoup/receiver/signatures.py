"""Verifying a request's Standard Webhooks signature (`webhook-id`, `webhook-timestamp`,
`webhook-signature`) against the tenant's `whsec_…` secret, at an instant given by the caller.

The `standardwebhooks` package decodes the secret and computes the expected `v1` signature; its
own `Webhook.verify` is not used because it reads the system clock (time is an argument here,
so tests and replays can freeze it) and raises a bare `ValueError` on a malformed signature
entry. The rules are the spec's and the reference library's: the signed content is
`{id}.{timestamp}.{raw body}` over the exact bytes received; `webhook-signature` is a
space-separated list (a sender rotating its secret signs with both) and any one `v1` entry that
matches is enough; entries of other versions are skipped; comparison is constant-time; the
timestamp must lie within `tolerance` of `now`, on either side (default five minutes, as the
reference library allows).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from standardwebhooks import Webhook

from recoup.errors import InvalidInput
from recoup.receiver.errors import SignatureError, TimestampOutOfTolerance
from recoup.timekeeping.instants import require_aware

DEFAULT_TOLERANCE: Final = timedelta(minutes=5)
HEADERS: Final = ("webhook-id", "webhook-timestamp", "webhook-signature")


@dataclass(frozen=True, kw_only=True)
class SignedMessage:
    """A verified request: its `webhook-id` (the same on every retry of one message) and the
    instant it was signed."""

    id: str
    timestamp: datetime


def check_secrets(secret: str | Sequence[str]) -> tuple[str, ...]:
    """The secret(s) as a tuple, each checked to decode: a bad secret is the receiver's
    configuration error, to report when the endpoint is set up, not on every request. The
    error never repeats the secret."""
    secrets = (secret,) if isinstance(secret, str) else tuple(secret)
    if not secrets:
        raise InvalidInput("secret", [], "expected at least one whsec_… secret")
    for s in secrets:
        try:
            _webhook(s)
        except Exception:
            # binascii.Error for bad base64, EmptyWebhookSecretError for "whsec_" alone.
            raise InvalidInput(
                "secret", "(hidden)", "expected whsec_ followed by base64, as Recoup shows it"
            ) from None
    return secrets


@functools.lru_cache(maxsize=64)
def _webhook(secret: str) -> Webhook:
    # Decoding a base64 secret once, not once per request.
    return Webhook(secret)


def verify_signature(
    headers: Mapping[str, str],
    body: bytes,
    *,
    secret: str | Sequence[str],
    now: datetime,
    tolerance: timedelta = DEFAULT_TOLERANCE,
) -> SignedMessage:
    """Check that `body` was signed with `secret` (or any of several, while rotating) no
    further than `tolerance` from `now`. Header names are matched case-insensitively.

    Raises `SignatureError` naming the header at fault, or `TimestampOutOfTolerance`.
    """
    require_aware("now", now)
    found = {name.lower(): value for name, value in headers.items()}
    for name in HEADERS:
        if not found.get(name, "").strip():
            raise SignatureError(f"{name}: the header is missing")
    message_id = found["webhook-id"].strip()
    timestamp = _parse_timestamp(found["webhook-timestamp"])
    if abs(timestamp - now) > tolerance:
        raise TimestampOutOfTolerance(timestamp, now.astimezone(UTC), tolerance)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise SignatureError("body: not UTF-8, so it cannot carry a signature") from None
    secrets = check_secrets(secret)
    expected = [
        _webhook(s).sign(msg_id=message_id, timestamp=timestamp, data=text).split(",", 1)[1]
        for s in secrets
    ]
    for entry in found["webhook-signature"].split():
        version, _, signature = entry.partition(",")
        if version != "v1" or not signature:
            continue  # another scheme (v1a), or noise: the spec says to skip it
        try:
            given = base64.b64decode(signature, validate=True)
        except binascii.Error:
            continue
        if any(hmac.compare_digest(given, base64.b64decode(e)) for e in expected):
            return SignedMessage(id=message_id, timestamp=timestamp)
    raise SignatureError("webhook-signature: no v1 signature matches the secret")


def _parse_timestamp(text: str) -> datetime:
    value = text.strip()
    # Integer Unix seconds only, as the spec writes them: a float or a date is not a timestamp
    # any sender would produce.
    if not value.isascii() or not value.isdigit() or len(value) > 12:
        raise SignatureError(f"webhook-timestamp: {text!r} is not integer Unix seconds")
    try:
        return datetime.fromtimestamp(int(value), tz=UTC)
    except (ValueError, OverflowError, OSError):  # past year 9999: no sender's clock
        raise SignatureError(f"webhook-timestamp: {text!r} is past year 9999") from None


__all__ = ["DEFAULT_TOLERANCE", "HEADERS", "SignedMessage", "check_secrets", "verify_signature"]
