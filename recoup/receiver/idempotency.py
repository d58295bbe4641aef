"""Idempotency keys in the handler's own database: a repeated request gets the first one's
stored answer instead of being processed again.

`begin(key, fingerprint, now=…)` has four outcomes (the types of `recoup.idempotency`):

- `New(locked_at)`: the key is free, or its lock outlived `lock_timeout` (the handler that held
  it crashed) and this request took it over: process, then `complete` or `release` under that
  lock;
- `Replay(status, body, content_type)`: the first request completed; answer what it answered;
- `InProgress(retry_after)`: the first request is still running; answer 409 with Retry-After;
- `Mismatch()`: the key was first used with another body; answer 422 (the IETF draft's code).

The table's primary key is the race guard: of two concurrent first requests, one insert wins;
the other sees the winner's row. `complete` and `release` are compare-and-set on `locked_at`,
so a slow request whose key was taken over can neither overwrite nor free the taker's.
The fingerprint is the sha256 of the canonical JSON of the body (sorted keys, no spaces), so a
sender that re-serialises its payload still matches itself.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Final, Generic

from recoup.errors import InvalidInput
from recoup.idempotency.keys import InProgress, Mismatch, New, Outcome, Replay, canonical_json
from recoup.receiver.database import C, Database
from recoup.timekeeping.instants import require_aware

DEFAULT_LOCK_TIMEOUT: Final = timedelta(seconds=90)  # as Rocket Rides: a hedge for lost unlocks
DEFAULT_RETENTION: Final = timedelta(hours=24)  # Stripe's floor for keeping keys
IN_PROGRESS_RETRY_AFTER: Final = 5  # seconds: a charge call usually answers within that


def body_fingerprint(body: bytes) -> str:
    """sha256 (hex) of the canonical form of a JSON body; a body that is not JSON is hashed as
    its bytes."""
    try:
        normalised = canonical_json(json.loads(body))
    except (ValueError, RecursionError):
        normalised = body
    return hashlib.sha256(normalised).hexdigest()


class IdempotencyStore(Generic[C]):
    """The `receiver_idempotency_keys` table of `database` (created by its `ensure_schema`)."""

    def __init__(
        self, database: Database[C], *, lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT
    ) -> None:
        if lock_timeout <= timedelta(0):
            raise InvalidInput("lock_timeout", lock_timeout, "expected a positive duration")
        self.database = database
        self.lock_timeout = lock_timeout

    def begin(self, key: str, fingerprint: str, *, now: datetime) -> Outcome:
        """Claim `key` for a request whose body has `fingerprint`, or say why not (see the
        module docstring). A different fingerprint is a `Mismatch` whatever the state of the
        first request."""
        if not key:
            raise InvalidInput("key", key, "expected a non-empty idempotency key")
        now = require_aware("now", now).astimezone(UTC)
        db = self.database
        at = db.encode_instant(now)
        with db.transaction() as conn:
            params = {"key": key, "fingerprint": fingerprint, "now": at}
            if db.run(conn, "claim_key", params):
                return New(locked_at=now)
            stored, locked_at, status, content_type, body = db.fetch(conn, "get_key", params)[0]
            if stored != fingerprint:
                return Mismatch()
            if status is not None:
                return Replay(status=status, body=bytes(body), content_type=content_type)
            if db.decode_instant(locked_at) <= now - self.lock_timeout:
                # The request that held it died mid-flight: this one takes over. Of two
                # takers the compare-and-set lets one through.
                taken = db.run(conn, "take_over_key", {**params, "locked_at": locked_at})
                if taken:
                    return New(locked_at=now)
            return InProgress(retry_after=IN_PROGRESS_RETRY_AFTER)

    def complete(
        self, key: str, *, locked_at: datetime, status: int, body: bytes, content_type: str
    ) -> bool:
        """Store the answer of the request holding `key` under `locked_at` and unlock the key.
        False (nothing stored) if the lock is no longer that one."""
        db = self.database
        params = {
            "key": key,
            "locked_at": db.encode_instant(locked_at),
            "status": status,
            "body": body,
            "content_type": content_type,
        }
        with db.transaction() as conn:
            return db.run(conn, "complete_key", params) == 1

    def release(self, key: str, *, locked_at: datetime) -> bool:
        """Forget an in-flight key (its answer is not final: a 5xx, a pending charge), so the
        next request with it runs afresh. False if the lock is no longer that one."""
        db = self.database
        with db.transaction() as conn:
            params = {"key": key, "locked_at": db.encode_instant(locked_at)}
            return db.run(conn, "release_key", params) == 1

    def prune(self, older_than: timedelta = DEFAULT_RETENTION, *, now: datetime) -> int:
        """Delete keys first used more than `older_than` before `now`; return how many. A key
        used again after that is a new request (the charge ledger still stops a second
        charge)."""
        if older_than <= timedelta(0):
            raise InvalidInput("older_than", older_than, "expected a positive duration")
        before = require_aware("now", now).astimezone(UTC) - older_than
        db = self.database
        with db.transaction() as conn:
            return db.run(conn, "prune_keys", {"before": db.encode_instant(before)})


__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_RETENTION",
    "IN_PROGRESS_RETRY_AFTER",
    "IdempotencyStore",
    "body_fingerprint",
]
