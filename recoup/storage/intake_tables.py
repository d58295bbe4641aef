"""The intake store (`recoup.recovery.intake_store.IntakeStore`) on both backends: a tenant's
intake settings and the provider events processed (migration 0008_intake.sql; queries in each
backend's `intake_queries.sql`).

`SqlIntakeTables` is written once over the dialect, like `SqlDunningTables` beside it;
`SqliteStore` and `PostgresStore` hold one. A claim is one
write transaction: insert the event's row, else read it and, when its claim is stale, take it
over by compare-and-set (on PostgreSQL the insert waits for a concurrent first delivery to
commit, then reads its row; on SQLite the write lock orders them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from recoup.recovery.intake_store import (
    Answered,
    Busy,
    Claim,
    Claimed,
    IntakeEvent,
    IntakeSettings,
)
from recoup.storage.dialect import Dialect


def _key(event: IntakeEvent) -> dict[str, Any]:
    return {"tenant": event.tenant, "provider": event.provider, "event_id": event.event_id}


class SqlIntakeTables:
    """`IntakeStore` over a dialect's connections, instant codec and queries."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._sql = dialect.queries

    # Settings

    def _settings_from_row(self, row: Sequence[Any]) -> IntakeSettings:
        return IntakeSettings(
            tenant=row[0],
            stripe_webhook_secret=row[1],
            default_timezone=row[2],
            updated_at=self._dialect.decode_instant(row[3]),
        )

    def get_intake_settings(self, tenant: str) -> IntakeSettings | None:
        with self._dialect.read() as conn:
            row = conn.execute(self._sql["get_intake_settings"], {"tenant": tenant}).fetchone()
        return None if row is None else self._settings_from_row(row)

    def put_intake_settings(self, settings: IntakeSettings) -> IntakeSettings:
        params = {
            "tenant": settings.tenant,
            "stripe_webhook_secret": settings.stripe_webhook_secret,
            "default_timezone": settings.default_timezone,
            "updated_at": self._dialect.encode_instant(settings.updated_at),
        }
        with self._dialect.write() as conn:
            row = conn.execute(self._sql["put_intake_settings"], params).fetchone()
        assert row is not None  # an upsert … RETURNING returns its row
        return self._settings_from_row(row)

    # Events

    def claim_event(self, event: IntakeEvent, *, now: datetime, lock_timeout: timedelta) -> Claim:
        encode, Q = self._dialect.encode_instant, self._sql
        key = _key(event)
        with self._dialect.write() as conn:
            inserted = conn.execute(
                Q["claim_event"],
                {
                    **key,
                    "type": event.type,
                    "invoice_id": event.invoice_id,
                    "occurred_at": encode(event.occurred_at),
                    "now": encode(now),
                },
            ).fetchone()
            if inserted is not None:
                return Claimed(claimed_at=now)
            row = conn.execute(Q["get_event"], key).fetchone()
            if row is None:  # released between the insert and the read: the retry claims it
                return Busy(retry_after=1)
            claimed_at, outcome, answer = self._dialect.decode_instant(row[0]), row[1], row[2]
            if outcome is not None:
                return Answered(outcome=outcome, answer=json.loads(answer))
            stale_in = claimed_at + lock_timeout - now
            if stale_in > timedelta(0):
                return Busy(retry_after=max(1, math.ceil(stale_in.total_seconds())))
            taken = conn.execute(
                Q["take_over_event"], {**key, "now": encode(now), "claimed_at": row[0]}
            ).fetchone()
        return Claimed(claimed_at=now) if taken is not None else Busy(retry_after=1)

    def finish_event(
        self,
        event: IntakeEvent,
        *,
        claimed_at: datetime,
        outcome: str,
        answer: Mapping[str, Any],
        now: datetime,
    ) -> None:
        encode = self._dialect.encode_instant
        params = {
            **_key(event),
            "claimed_at": encode(claimed_at),
            "outcome": outcome,
            "answer": json.dumps(answer, ensure_ascii=False),
            "now": encode(now),
        }
        with self._dialect.write() as conn:
            conn.execute(self._sql["finish_event"], params)

    def release_event(self, event: IntakeEvent, *, claimed_at: datetime) -> None:
        params = {**_key(event), "claimed_at": self._dialect.encode_instant(claimed_at)}
        with self._dialect.write() as conn:
            conn.execute(self._sql["release_event"], params)

    def invoice_event_since(
        self, tenant: str, provider: str, invoice_id: str, *, types: Sequence[str], since: datetime
    ) -> bool:
        params = {
            "tenant": tenant,
            "provider": provider,
            "invoice_id": invoice_id,
            "since": self._dialect.encode_instant(since),
            "types": self._dialect.encode_texts(types),
        }
        with self._dialect.read() as conn:
            row = conn.execute(self._sql["invoice_event_since"], params).fetchone()
        return bool(row[0])

    def prune_events(self, *, older_than: datetime, limit: int = 10_000) -> int:
        params = {"before": self._dialect.encode_instant(older_than), "limit": limit}
        with self._dialect.write() as conn:
            pruned: int = conn.execute(self._sql["prune_events"], params).rowcount
        return pruned


__all__ = ["SqlIntakeTables"]
