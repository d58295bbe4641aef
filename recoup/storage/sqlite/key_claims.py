"""Claiming an idempotency key on SQLite (`SqlApiTables.begin`): one write transaction, so
concurrent first requests with one key are serialised by SQLite's write lock, with the primary
key as the backstop."""

from __future__ import annotations

from recoup.idempotency.keys import InProgress, Mismatch, New, Outcome, Replay
from recoup.storage.api_tables import RETRY_AFTER_SECONDS, KeyRequest
from recoup.storage.job_rows import micros
from recoup.storage.sqlite.dialect import QUERIES, SqliteDialect

Q = QUERIES


def claim_key(dialect: SqliteDialect, request: KeyRequest) -> Outcome:
    """New (the key is this request's now), a replay of its stored answer, a mismatch of its
    fingerprint, or in progress elsewhere."""
    now = request.now
    with dialect.write() as conn:
        if conn.execute(Q["claim_key"], request.claim).rowcount:
            return New(locked_at=now)
        stored, locked_at, status, content_type, body = conn.execute(
            Q["get_key"], request.ids
        ).fetchone()
        if stored != request.fingerprint:
            return Mismatch()
        if status is not None:
            return Replay(status=status, body=bytes(body), content_type=content_type)
        if locked_at < micros(now - request.lock_timeout):
            # The request that held it died mid-flight: this one takes over.
            take_over = {**request.ids, "now": micros(now), "locked_at": locked_at}
            conn.execute(Q["take_over_key"], take_over)
            return New(locked_at=now)
        return InProgress(retry_after=RETRY_AFTER_SECONDS)
