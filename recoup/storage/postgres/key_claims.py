"""Claiming an idempotency key on PostgreSQL (`SqlApiTables.begin`). Concurrent first requests
with one key race on `INSERT … ON CONFLICT DO NOTHING`: the primary key (tenant, key) lets
exactly one insert through; the others wait for it to commit, insert nothing, and read the
winner's row."""

from __future__ import annotations

from recoup.idempotency.keys import InProgress, Mismatch, New, Outcome, Replay
from recoup.storage.api_tables import RETRY_AFTER_SECONDS, KeyRequest
from recoup.storage.postgres.dialect import QUERIES, PostgresDialect

Q = QUERIES

BEGIN_TRIES = 5  # a key released between our insert and our read: look again, briefly


def claim_key(dialect: PostgresDialect, request: KeyRequest) -> Outcome:
    """New (the key is this request's now), a replay of its stored answer, a mismatch of its
    fingerprint, or in progress elsewhere."""
    now, claim = request.now, request.claim
    # A new key (the usual case) is one statement in autocommit: one round trip.
    with dialect.statement_write() as conn:
        if conn.execute(Q["claim_key"], claim).fetchone() is not None:
            return New(locked_at=now)
    for _ in range(BEGIN_TRIES):
        with dialect.write() as conn:
            if conn.execute(Q["claim_key"], claim).fetchone() is not None:
                return New(locked_at=now)
            row = conn.execute(Q["get_key"], request.ids).fetchone()
            if row is None:
                continue  # released meanwhile
            stored, locked_at, status, content_type, body = row
            if stored != request.fingerprint:
                return Mismatch()
            if status is not None:
                return Replay(status=status, body=bytes(body), content_type=content_type)
            if locked_at < now - request.lock_timeout:
                # The request that held it died mid-flight: one taker wins the CAS.
                take_over = {**request.ids, "now": now, "locked_at": locked_at}
                if conn.execute(Q["take_over_key"], take_over).fetchone() is not None:
                    return New(locked_at=now)
            return InProgress(retry_after=RETRY_AFTER_SECONDS)
    return InProgress(retry_after=RETRY_AFTER_SECONDS)
