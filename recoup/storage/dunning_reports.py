"""What the recovery report reads from the dunning store, on both backends: the invoices of a
window in bulk, events counted by type, and the merchant ids an operator has tagged (migration
0005_recovery_analytics.sql; queries in each backend's `dunning_queries.sql`).

`SqlDunningReports` is written once over `SqlStore`'s hooks and the backend's `DQ` queries,
like `SqlDunningTables` beside it; `SqliteStore` and `PostgresStore` inherit both. A report
over thousands of invoices is two statements, not one per invoice: the invoices of the window,
then every attempt of those invoices, in one snapshot (`_snapshot`), so an invoice is never
paired with attempts of another version.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from operator import attrgetter
from typing import Any, ClassVar

from recoup.dunning.invoice import AttemptRecord, Invoice
from recoup.errors import InvalidInput
from recoup.recovery.store import MerchantTag, check_merchant_tag
from recoup.storage.dunning_rows import (
    INVOICE_COLUMNS,
    attempt_from_row,
    invoice_from_row,
    tag_from_row,
    tag_values,
)
from recoup.storage.sql_store import SqlStore
from recoup.timekeeping.instants import require_aware


def _window(since: datetime, until: datetime) -> None:
    require_aware("since", since)
    require_aware("until", until)
    if until < since:
        raise InvalidInput("until", until.isoformat(), f"expected at or after since ({since})")


class SqlDunningReports(SqlStore):
    """The report's reads and the merchant tags, over a `SqlStore`'s connections, instant
    codec and `DQ` queries."""

    DQ: ClassVar[Mapping[str, str]]

    def _snapshot(self) -> AbstractContextManager[Any]:
        """A connection on which successive statements read one snapshot of the database."""
        raise NotImplementedError

    def report_invoices(self, tenant: str, *, since: datetime, until: datetime) -> list[Invoice]:
        _window(since, until)
        encode, instant = self._encode_instant, self._decode_instant
        params = {"tenant": tenant, "since": encode(since), "until": encode(until)}
        with self._snapshot() as conn:
            heads = self._execute_batch(conn, self.DQ["report_invoices"], params).fetchall()
            attempt_rows = self._execute_batch(conn, self.DQ["report_attempts"], params)
            attempts: defaultdict[str, list[AttemptRecord]] = defaultdict(list)
            for row in attempt_rows:
                attempts[row[0]].append(attempt_from_row(row[1:], instant))
        key = INVOICE_COLUMNS.index("invoice_id")
        by_number = attrgetter("attempt")
        return [
            invoice_from_row(head, sorted(attempts.get(head[key], ()), key=by_number), instant)
            for head in heads
        ]

    def count_events(self, tenant: str, type: str, *, since: datetime, until: datetime) -> int:
        _window(since, until)
        encode = self._encode_instant
        params = {"tenant": tenant, "type": type, "since": encode(since), "until": encode(until)}
        with self.read() as conn:
            row = conn.execute(self.DQ["count_events"], params).fetchone()
        return int(row[0])

    def put_merchant_tag(self, tenant: str, tag: MerchantTag) -> MerchantTag:
        check_merchant_tag(tag)
        with self.write() as conn:
            row = conn.execute(
                self.DQ["put_merchant_tag"], tag_values(tenant, tag, self._encode_instant)
            ).fetchone()
        return tag_from_row(row, self._decode_instant)

    def delete_merchant_tag(self, tenant: str, merchant_id: str) -> bool:
        params = {"tenant": tenant, "merchant_id": merchant_id}
        with self.write() as conn:
            return bool(conn.execute(self.DQ["delete_merchant_tag"], params).rowcount)

    def merchant_tags(self, tenant: str) -> list[MerchantTag]:
        with self.read() as conn:
            rows = conn.execute(self.DQ["merchant_tags"], {"tenant": tenant}).fetchall()
        instant = self._decode_instant
        return [tag_from_row(row, instant) for row in rows]


__all__ = ["SqlDunningReports"]
