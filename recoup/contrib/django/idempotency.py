"""Request keys in the `IdempotencyRecord` table: the Django side of
`recoup.receiver.IdempotencyStore`, with its outcomes and the same rules.

`begin(key, fingerprint, now=…)` claims a key in a transaction of its own, committed before
the request is processed, so that a concurrent duplicate sees the claim:

- `New(locked_at)`: the key was free, or its lock outlived `lock_timeout` (the request holding
  it died) and this one took it over: process, then `complete` or `release` under that lock;
- `Replayed(status, body, content_type, headers)`: the first request completed: answer that;
- `InProgress(retry_after)`: the first request is still running: answer 409;
- `Mismatch()`: the key was first used with another body: answer 422.

The claim inserts first. On PostgreSQL the primary key decides a race (the second insert waits
for the first to commit, then fails) and the row is then read `FOR UPDATE`; on SQLite the
insert takes the database's write lock, so the read that follows cannot race. `complete` and
`release` are compare-and-set on `locked_at`: a slow request whose key was taken over can
neither overwrite nor free the taker's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import IntegrityError, transaction

from recoup.contrib.django.models import IdempotencyRecord
from recoup.errors import InvalidInput
from recoup.idempotency.keys import InProgress, Mismatch, New
from recoup.receiver.idempotency import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_RETENTION,
    IN_PROGRESS_RETRY_AFTER,
)
from recoup.timekeeping.instants import require_aware

# A key freed by its holder between our failed insert and our read is free again: try anew, a
# bounded number of times (each round needs another request to finish in between).
_CLAIM_ROUNDS = 3


@dataclass(frozen=True, kw_only=True)
class Replayed:
    """The key's first request completed: its stored answer, to send again."""

    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


Claim = New | Replayed | InProgress | Mismatch


class IdempotencyRecords:
    """The `IdempotencyRecord` rows of database `using`."""

    def __init__(self, *, using: str, lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT) -> None:
        if lock_timeout <= timedelta(0):
            raise InvalidInput("lock_timeout", lock_timeout, "expected a positive duration")
        self.using = using
        self.lock_timeout = lock_timeout

    def begin(self, key: str, fingerprint: str, *, now: datetime) -> Claim:
        """Claim `key` for a request whose body has `fingerprint`, or say why not (see the
        module docstring). Raises django.db.DatabaseError when the database fails."""
        if not key:
            raise InvalidInput("key", key, "expected a non-empty idempotency key")
        now = require_aware("now", now).astimezone(UTC)
        rows = IdempotencyRecord.objects.using(self.using)
        with transaction.atomic(using=self.using):
            for _ in range(_CLAIM_ROUNDS):
                try:
                    with transaction.atomic(using=self.using):  # a savepoint to fail into
                        rows.create(key=key, fingerprint=fingerprint, created_at=now, locked_at=now)
                    return New(locked_at=now)
                except IntegrityError:
                    pass
                row = rows.select_for_update().filter(pk=key).first()
                if row is None:
                    continue  # released meanwhile
                if row.fingerprint != fingerprint:
                    return Mismatch()
                if row.status is not None:
                    return Replayed(
                        status=row.status,
                        body=bytes(row.body or b""),
                        content_type=row.content_type or "application/octet-stream",
                        headers=dict(row.headers or {}),
                    )
                if row.locked_at is not None and row.locked_at <= now - self.lock_timeout:
                    # The request that held it died mid-flight: this one takes over, under
                    # the row lock (PostgreSQL) or the write lock (SQLite).
                    row.locked_at = now
                    row.save(update_fields=["locked_at"])
                    return New(locked_at=now)
                return InProgress(retry_after=IN_PROGRESS_RETRY_AFTER)
        return InProgress(retry_after=IN_PROGRESS_RETRY_AFTER)

    def complete(
        self,
        key: str,
        *,
        locked_at: datetime,
        status: int,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> bool:
        """Store the answer of the request holding `key` under `locked_at` and unlock it.
        False (nothing stored) if the lock is no longer that one."""
        changed = (
            IdempotencyRecord.objects.using(self.using)
            .filter(pk=key, status__isnull=True, locked_at=locked_at)
            .update(
                status=status,
                body=body,
                content_type=content_type,
                headers=headers or {},
                locked_at=None,
            )
        )
        return changed == 1

    def release(self, key: str, *, locked_at: datetime) -> bool:
        """Forget an in-flight key (its answer is not final), so the next request with it runs
        afresh. False if the lock is no longer that one."""
        deleted, _ = (
            IdempotencyRecord.objects.using(self.using)
            .filter(pk=key, status__isnull=True, locked_at=locked_at)
            .delete()
        )
        return deleted == 1

    def prune(self, older_than: timedelta = DEFAULT_RETENTION, *, now: datetime) -> int:
        """Delete keys first used more than `older_than` before `now`; return how many. A key
        used again after that is a new request (the charge ledger still stops a second
        charge)."""
        if older_than <= timedelta(0):
            raise InvalidInput("older_than", older_than, "expected a positive duration")
        before = require_aware("now", now).astimezone(UTC) - older_than
        deleted, _ = (
            IdempotencyRecord.objects.using(self.using).filter(created_at__lt=before).delete()
        )
        return deleted


__all__ = ["Claim", "IdempotencyRecords", "Replayed"]
