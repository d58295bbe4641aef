"""What the recovery report reads from the dunning store, on both backends: the invoices of a
window in bulk, events counted by type, and the merchant ids an operator has tagged (migration
0005_recovery_analytics.sql; queries in each backend's `dunning_queries.sql`).

`SqlDunningReports` is written once over the dialect, like `SqlDunningTables` beside it;
`SqliteStore` and `PostgresStore` hold both. A report over thousands of invoices is two
statements, not one per invoice: the invoices of the window, then every attempt of those
invoices, in one snapshot (the dialect's `snapshot`), so an invoice is never paired with
attempts of another version.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from operator import attrgetter

from recoup.dunning.invoice import AttemptRecord, Invoice
from recoup.errors import InvalidInput
from recoup.recovery.figures import DunningFigures, TenantFigures, figures_from_rows
from recoup.recovery.store import AnsweredAttempt, MerchantTag, check_merchant_tag
from recoup.storage.dialect import Dialect
from recoup.storage.dunning_rows import (
    ATTEMPT_COLUMNS,
    INVOICE_COLUMNS,
    attempt_from_row,
    invoice_from_row,
    tag_from_row,
    tag_values,
)
from recoup.timekeeping.instants import require_aware


def _window(since: datetime, until: datetime) -> None:
    require_aware("since", since)
    require_aware("until", until)
    if until < since:
        raise InvalidInput("until", until.isoformat(), f"expected at or after since ({since})")


class SqlDunningReports:
    """The report's reads and the merchant tags, over a dialect's connections, instant codec
    and queries."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._sql = dialect.queries

    def learner_attempts(
        self, tenant: str, *, since: datetime, limit: int = 10_000
    ) -> list[AnsweredAttempt]:
        require_aware("since", since)
        encode, instant = self._dialect.encode_instant, self._dialect.decode_instant
        params = {"tenant": tenant, "since": encode(since), "limit": limit}
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["learner_attempts"], params).fetchall()
        width = len(ATTEMPT_COLUMNS)
        return [
            AnsweredAttempt(
                invoice_id=row[0],
                attempt=attempt_from_row(row[1 : 1 + width], instant),
                timezone=row[1 + width],
                country=row[2 + width],
                decline_code=row[3 + width],
                advice_code=row[4 + width],
                card_network=row[5 + width],
            )
            for row in rows
        ]

    def report_invoices(self, tenant: str, *, since: datetime, until: datetime) -> list[Invoice]:
        _window(since, until)
        encode, instant = self._dialect.encode_instant, self._dialect.decode_instant
        params = {"tenant": tenant, "since": encode(since), "until": encode(until)}
        with self._dialect.snapshot() as conn:
            heads = self._dialect.execute_batch(
                conn, self._sql["report_invoices"], params
            ).fetchall()
            attempt_rows = self._dialect.execute_batch(conn, self._sql["report_attempts"], params)
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
        encode = self._dialect.encode_instant
        params = {"tenant": tenant, "type": type, "since": encode(since), "until": encode(until)}
        with self._dialect.read() as conn:
            row = conn.execute(self._sql["count_events"], params).fetchone()
        return int(row[0])

    def dunning_amounts(self, tenant: str, *, since: datetime, until: datetime) -> TenantFigures:
        _window(since, until)
        encode = self._dialect.encode_instant
        params = {"tenant": tenant, "since": encode(since), "until": encode(until)}
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["dunning_amounts"], params).fetchall()
        return figures_from_rows(rows, (), ()).get(tenant, TenantFigures())

    def dunning_figures(self) -> DunningFigures:
        """Every tenant's dunning figures for /metrics (`recoup.recovery.figures`)."""
        with self._dialect.snapshot() as conn:
            rows = [
                self._dialect.execute_batch(conn, self._sql[name], {}).fetchall()
                for name in (
                    "dunning_figures_invoices",
                    "dunning_figures_attempts",
                    "dunning_figures_double_charges",
                )
            ]
        return figures_from_rows(*rows)

    def put_merchant_tag(self, tenant: str, tag: MerchantTag) -> MerchantTag:
        check_merchant_tag(tag)
        with self._dialect.write() as conn:
            row = conn.execute(
                self._sql["put_merchant_tag"], tag_values(tenant, tag, self._dialect.encode_instant)
            ).fetchone()
        return tag_from_row(row, self._dialect.decode_instant)

    def delete_merchant_tag(self, tenant: str, merchant_id: str) -> bool:
        params = {"tenant": tenant, "merchant_id": merchant_id}
        with self._dialect.write() as conn:
            return bool(conn.execute(self._sql["delete_merchant_tag"], params).rowcount)

    def merchant_tags(self, tenant: str) -> list[MerchantTag]:
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["merchant_tags"], {"tenant": tenant}).fetchall()
        instant = self._dialect.decode_instant
        return [tag_from_row(row, instant) for row in rows]


__all__ = ["SqlDunningReports"]
