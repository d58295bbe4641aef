"""The intake store (`recoup.recovery.intake_store.IntakeStore`) on both backends: a tenant's
intake settings and the provider events processed (migration 0008_intake.sql; queries in each
backend's `intake_queries.sql`).

`SqlIntakeTables` is written once over `SqlStore`'s hooks and the backend's `IQ` queries, like
`SqlDunningTables` beside it; `SqliteStore` and `PostgresStore` inherit it. A claim is one
write transaction: insert the event's row, else read it and, when its claim is stale, take it
over by compare-and-set (on PostgreSQL the insert waits for a concurrent first delivery to
commit, then reads its row; on SQLite the write lock orders them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar

from recoup.recovery.intake_store import (
    Answered,
    Busy,
    Claim,
    Claimed,
    IntakeEvent,
    IntakeSettings,
)
from recoup.storage.sql_store import SqlStore


def _key(event: IntakeEvent) -> dict[str, Any]:
    return {"tenant": event.tenant, "provider": event.provider, "event_id": event.event_id}


class SqlIntakeTables(SqlStore):
    """`IntakeStore` over a `SqlStore`'s connections, instant codec and `IQ` queries."""

    IQ: ClassVar[Mapping[str, str]]

    def _encode_texts(self, values: Sequence[str]) -> Any:
        """Strings as one query parameter (PostgreSQL's text[]; SQLite overrides it)."""
        return list(values)

    # Settings

    def _settings_from_row(self, row: Sequence[Any]) -> IntakeSettings:
        return IntakeSettings(
            tenant=row[0],
            stripe_webhook_secret=row[1],
            default_timezone=row[2],
            updated_at=self._decode_instant(row[3]),
        )

    def get_intake_settings(self, tenant: str) -> IntakeSettings | None:
        with self.read() as conn:
            row = conn.execute(self.IQ["get_intake_settings"], {"tenant": tenant}).fetchone()
        return None if row is None else self._settings_from_row(row)

    def put_intake_settings(self, settings: IntakeSettings) -> IntakeSettings:
        params = {
            "tenant": settings.tenant,
            "stripe_webhook_secret": settings.stripe_webhook_secret,
            "default_timezone": settings.default_timezone,
            "updated_at": self._encode_instant(settings.updated_at),
        }
        with self.write() as conn:
            row = conn.execute(self.IQ["put_intake_settings"], params).fetchone()
        assert row is not None  # an upsert … RETURNING returns its row
        return self._settings_from_row(row)

    # Events

    def claim_event(self, event: IntakeEvent, *, now: datetime, lock_timeout: timedelta) -> Claim:
        encode, IQ = self._encode_instant, self.IQ
        key = _key(event)
        with self.write() as conn:
            inserted = conn.execute(
                IQ["claim_event"],
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
            row = conn.execute(IQ["get_event"], key).fetchone()
            if row is None:  # released between the insert and the read: the retry claims it
                return Busy(retry_after=1)
            claimed_at, outcome, answer = self._decode_instant(row[0]), row[1], row[2]
            if outcome is not None:
                return Answered(outcome=outcome, answer=json.loads(answer))
            stale_in = claimed_at + lock_timeout - now
            if stale_in > timedelta(0):
                return Busy(retry_after=max(1, math.ceil(stale_in.total_seconds())))
            taken = conn.execute(
                IQ["take_over_event"], {**key, "now": encode(now), "claimed_at": row[0]}
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
        encode = self._encode_instant
        params = {
            **_key(event),
            "claimed_at": encode(claimed_at),
            "outcome": outcome,
            "answer": json.dumps(answer, ensure_ascii=False),
            "now": encode(now),
        }
        with self.write() as conn:
            conn.execute(self.IQ["finish_event"], params)

    def release_event(self, event: IntakeEvent, *, claimed_at: datetime) -> None:
        params = {**_key(event), "claimed_at": self._encode_instant(claimed_at)}
        with self.write() as conn:
            conn.execute(self.IQ["release_event"], params)

    def invoice_event_since(
        self, tenant: str, provider: str, invoice_id: str, *, types: Sequence[str], since: datetime
    ) -> bool:
        params = {
            "tenant": tenant,
            "provider": provider,
            "invoice_id": invoice_id,
            "since": self._encode_instant(since),
            "types": self._encode_texts(types),
        }
        with self.read() as conn:
            row = conn.execute(self.IQ["invoice_event_since"], params).fetchone()
        return bool(row[0])

    def prune_events(self, *, older_than: datetime, limit: int = 10_000) -> int:
        params = {"before": self._encode_instant(older_than), "limit": limit}
        with self.write() as conn:
            pruned: int = conn.execute(self.IQ["prune_events"], params).rowcount
        return pruned


__all__ = ["SqlIntakeTables"]
