"""The dunning store (`recoup.recovery.store.DunningStore`) on both backends: invoices, their
attempts and events, and per-tenant settings (migration 0003_dunning.sql; queries in each
backend's `dunning_queries.sql`).

`SqlDunningTables` is written once over the dialect (`recoup.storage.dialect`: its connections,
instant codec and queries); `SqliteStore` and `PostgresStore` hold one and forward to it, so the
store `open_store` returns is a `DunningStore` too, in the same database as the jobs (one query
sees an attempt and its job). What differs by dialect is in the SQL (placeholders,
`FOR UPDATE`, jsonb casts) and in `encode_texts` (a list of strings as one parameter). The
mapping between the records and rows (and the column lists the queries expand) is
`dunning_rows`; this module holds the argument checks and the operations.

An invoice is always read with its attempts in one statement (the invoice rows `LEFT JOIN`
their attempts), so a reader never pairs an invoice with attempts of another version.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, get_args

from recoup.dunning.invoice import AttemptRecord, Invoice, InvoiceEvent, InvoiceState
from recoup.dunning.limits import CardAttempt
from recoup.dunning.outcomes import DecisionKind
from recoup.dunning.policy import FinalAction
from recoup.errors import Conflict, InvalidInput
from recoup.recovery.store import (
    AttemptRef,
    DunningSettings,
    InvoiceChange,
    InvoiceFilter,
    InvoicePage,
)
from recoup.storage.dialect import Dialect
from recoup.storage.dunning_rows import (
    ATTEMPT_COLUMNS,
    EVENT_COLUMNS,
    EXPANSIONS,
    INVOICE_COLUMNS,
    SETTINGS_COLUMNS,
    attempt_from_row,
    attempt_values,
    event_from_row,
    event_values,
    invoice_values,
    invoices_from_rows,
    settings_from_row,
    settings_values,
)
from recoup.storage.job_rows import decode_cursor, encode_cursor
from recoup.storage.rules import check_page_limit

_DECISIONS = frozenset(get_args(DecisionKind))
_FINAL_ACTIONS = frozenset(action.value for action in FinalAction)


def check_invoice(invoice: Invoice) -> None:
    """`InvalidInput` naming the field for what the tables' CHECK constraints would refuse, so
    that a bad record is the caller's 422, not a database error."""
    if invoice.amount <= 0:
        raise InvalidInput("amount", invoice.amount, "expected > 0 (minor units)")
    if invoice.version < 0:
        raise InvalidInput("version", invoice.version, "expected ≥ 0")
    if invoice.decision not in _DECISIONS:
        raise InvalidInput("decision", invoice.decision, f"expected one of {sorted(_DECISIONS)}")
    if invoice.final_action not in _FINAL_ACTIONS:
        raise InvalidInput(
            "final_action", invoice.final_action, f"expected one of {sorted(_FINAL_ACTIONS)}"
        )
    if invoice.recovered_by is not None and invoice.state is not InvoiceState.RECOVERED:
        raise InvalidInput(
            "recovered_by", invoice.recovered_by, "expected None unless the state is recovered"
        )


def check_events(tenant: str, invoice_id: str, events: Sequence[InvoiceEvent]) -> None:
    """`InvalidInput` unless every event is the invoice's, numbered from 1, each number and id
    once."""
    seqs: set[int] = set()
    ids: set[str] = set()
    for event in events:
        if (event.tenant, event.invoice_id) != (tenant, invoice_id):
            raise InvalidInput(
                "events.invoice_id",
                f"{event.tenant}/{event.invoice_id}",
                f"expected the invoice's own events ({tenant}/{invoice_id})",
            )
        if event.seq < 1 or event.seq in seqs:
            raise InvalidInput("events.seq", event.seq, "expected distinct numbers ≥ 1")
        if event.id in ids:
            raise InvalidInput("events.id", event.id, "expected distinct ids")
        if not event.type:
            raise InvalidInput("events.type", event.type, "expected a non-empty type")
        seqs.add(event.seq)
        ids.add(event.id)


class SqlDunningTables:
    """`DunningStore` over a dialect's connections, instant codec and queries."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._sql = dialect.queries

    # Writing, inside a caller's transaction

    def _read_invoice(self, conn: Any, tenant: str, invoice_id: str) -> Invoice | None:
        rows = conn.execute(
            self._sql["get_invoice"], {"tenant": tenant, "invoice_id": invoice_id}
        ).fetchall()
        found = invoices_from_rows(rows, self._dialect.decode_instant)
        return found[0] if found else None

    def _write_attempts(
        self, conn: Any, invoice: Invoice, attempts: Sequence[AttemptRecord]
    ) -> None:
        if attempts:
            encode = self._dialect.encode_instant
            rows = [attempt_values(invoice, attempt, encode) for attempt in attempts]
            conn.cursor().executemany(self._sql["upsert_attempt"], rows)

    def _write_events(
        self, conn: Any, tenant: str, invoice_id: str, events: Sequence[InvoiceEvent]
    ) -> None:
        """Insert the events whose ids are not stored yet; a number the invoice already holds
        under another id → `Conflict` (two transitions that both thought they were next)."""
        if not events:
            return
        held = dict(
            conn.execute(
                self._sql["event_numbers"],
                {
                    "tenant": tenant,
                    "invoice_id": invoice_id,
                    "from_seq": min(e.seq for e in events),
                },
            ).fetchall()
        )
        new = []
        encode = self._dialect.encode_instant
        for event in events:
            holder = held.get(event.seq)
            if holder == event.id:
                continue  # stored already (a replayed transition)
            if holder is not None:
                raise Conflict(
                    f"invoice {invoice_id!r} already has event {event.seq} ({holder!r}),"
                    f" not {event.id!r}"
                )
            new.append(event_values(event, encode))
        if new:
            conn.cursor().executemany(self._sql["insert_event"], new)

    # Invoices

    def create_invoice(
        self, invoice: Invoice, events: Sequence[InvoiceEvent]
    ) -> tuple[Invoice, bool]:
        check_invoice(invoice)
        check_events(invoice.tenant, invoice.invoice_id, events)
        with self._dialect.write() as conn:
            # The primary key decides concurrent creations: one insert wins; on PostgreSQL the
            # others wait for it to commit, insert nothing and read the winner's invoice.
            inserted = conn.execute(
                self._sql["insert_invoice"], invoice_values(invoice, self._dialect.encode_instant)
            ).fetchone()
            if inserted is None:
                stored = self._read_invoice(conn, invoice.tenant, invoice.invoice_id)
                assert stored is not None  # present, or the insert would have won
                return stored, False
            self._write_attempts(conn, invoice, invoice.attempts)
            self._write_events(conn, invoice.tenant, invoice.invoice_id, events)
        return invoice, True

    def get_invoice(self, tenant: str, invoice_id: str) -> Invoice | None:
        with self._dialect.read() as conn:
            return self._read_invoice(conn, tenant, invoice_id)

    def list_invoices(self, query: InvoiceFilter) -> InvoicePage:
        check_page_limit(query.limit)
        cursor_created: Any = None
        cursor_id: str | None = None
        if query.cursor is not None:
            created, cursor_id = decode_cursor(query.cursor)
            cursor_created = self._dialect.encode_instant(created)
        # One statement per filter, each a plain equality on its index's leading columns (SQLite
        # cannot plan `:x IS NULL OR x = :x` onto an index).
        if query.customer_id is not None:
            statement = self._sql["list_invoices_of_customer"]
        elif query.state is not None:
            statement = self._sql["list_invoices_in_state"]
        else:
            statement = self._sql["list_invoices"]
        with self._dialect.read() as conn:
            rows = self._dialect.execute_batch(
                conn,
                statement,
                {
                    "tenant": query.tenant,
                    "state": None if query.state is None else query.state.value,
                    "customer_id": query.customer_id,
                    "cursor_created": cursor_created,
                    "cursor_id": cursor_id,
                    "limit": query.limit + 1,  # one more says whether a next page exists
                },
            ).fetchall()
        invoices = invoices_from_rows(rows, self._dialect.decode_instant)
        next_cursor = None
        if len(invoices) > query.limit:
            invoices = invoices[: query.limit]
            last = invoices[-1]
            next_cursor = encode_cursor(last.created_at, last.invoice_id)
        return InvoicePage(invoices=invoices, next_cursor=next_cursor)

    def change_invoice(
        self,
        tenant: str,
        invoice_id: str,
        change: Callable[[Invoice], InvoiceChange | None],
    ) -> InvoiceChange | None:
        ids = {"tenant": tenant, "invoice_id": invoice_id}
        with self._dialect.write() as conn:
            # Lock first, then read in a statement of its own: on PostgreSQL a statement that
            # waited for the lock would still see the attempts as they were when it began.
            if conn.execute(self._sql["lock_invoice"], ids).fetchone() is None:
                return None
            current = self._read_invoice(conn, tenant, invoice_id)
            assert current is not None  # locked: it cannot have gone
            result = change(current)
            if result is None:
                return None
            new = result.invoice
            if (new.tenant, new.invoice_id) != (tenant, invoice_id):
                raise InvalidInput(
                    "invoice.invoice_id",
                    f"{new.tenant}/{new.invoice_id}",
                    f"expected the invoice changed ({tenant}/{invoice_id})",
                )
            if new.version != current.version + 1:
                raise Conflict(
                    f"invoice {invoice_id!r} is at version {current.version}; a change must"
                    f" write version {current.version + 1}, not {new.version}"
                )
            check_invoice(new)
            check_events(tenant, invoice_id, result.events)
            values = invoice_values(new, self._dialect.encode_instant)
            values["expected_version"] = current.version
            # Compare-and-set on the version: the backstop of the lock.
            if not conn.execute(self._sql["update_invoice"], values).rowcount:
                raise Conflict(f"invoice {invoice_id!r} changed meanwhile")
            changed = [a for a in new.attempts if current.attempt(a.attempt) != a]
            self._write_attempts(conn, new, changed)
            self._write_events(conn, tenant, invoice_id, result.events)
        return result

    # Events

    def invoice_events(self, tenant: str, invoice_id: str) -> list[InvoiceEvent]:
        ids = {"tenant": tenant, "invoice_id": invoice_id}
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["invoice_events"], ids).fetchall()
        instant = self._dialect.decode_instant
        return [event_from_row(row, instant) for row in rows]

    def event_count(self, tenant: str, invoice_id: str) -> int:
        ids = {"tenant": tenant, "invoice_id": invoice_id}
        with self._dialect.read() as conn:
            return int(conn.execute(self._sql["event_count"], ids).fetchone()[0])

    def undispatched_events(self, *, limit: int = 500) -> list[InvoiceEvent]:
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["undispatched_events"], {"limit": limit}).fetchall()
        instant = self._dialect.decode_instant
        return [event_from_row(row, instant) for row in rows]

    def mark_events_dispatched(self, event_ids: Sequence[str], *, now: datetime) -> None:
        if not event_ids:
            return
        params = {
            "ids": self._dialect.encode_texts(event_ids),
            "now": self._dialect.encode_instant(now),
        }
        with self._dialect.statement_write() as conn:
            conn.execute(self._sql["mark_events_dispatched"], params)

    # Consistency with the jobs

    def attempts_out_of_sync(self, *, limit: int = 500) -> list[AttemptRef]:
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["attempts_out_of_sync"], {"limit": limit}).fetchall()
        instant = self._dialect.decode_instant
        return [
            AttemptRef(tenant=row[0], invoice_id=row[1], attempt=attempt_from_row(row[2:], instant))
            for row in rows
        ]

    def attempts_ended_unanswered(self, *, limit: int = 500) -> list[AttemptRef]:
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["attempts_ended_unanswered"], {"limit": limit}).fetchall()
        instant = self._dialect.decode_instant
        return [
            AttemptRef(
                tenant=row[0],
                invoice_id=row[1],
                attempt=attempt_from_row(row[2:-1], instant),
                job_state=row[-1],
            )
            for row in rows
        ]

    # Card history

    def card_history(self, tenant: str, card: str, *, since: datetime) -> list[CardAttempt]:
        params = {"tenant": tenant, "card": card, "since": self._dialect.encode_instant(since)}
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["card_history"], params).fetchall()
        instant = self._dialect.decode_instant
        return [
            CardAttempt(
                card=card,
                at=instant(at),
                invoice=invoice_id,
                merchant_id=merchant_id,
                amount=amount,
                reattempt=bool(reattempt),
            )
            for invoice_id, at, merchant_id, amount, reattempt in rows
        ]

    # Settings

    def get_settings(self, tenant: str) -> DunningSettings | None:
        with self._dialect.read() as conn:
            row = conn.execute(self._sql["get_settings"], {"tenant": tenant}).fetchone()
        return None if row is None else settings_from_row(row, self._dialect.decode_instant)

    def put_settings(self, settings: DunningSettings) -> DunningSettings:
        params = settings_values(settings, self._dialect.encode_instant)
        with self._dialect.write() as conn:
            row = conn.execute(self._sql["put_settings"], params).fetchone()
        assert row is not None  # an upsert … RETURNING returns its row
        return settings_from_row(row, self._dialect.decode_instant)


__all__ = [
    "ATTEMPT_COLUMNS",
    "EVENT_COLUMNS",
    "EXPANSIONS",
    "INVOICE_COLUMNS",
    "SETTINGS_COLUMNS",
    "SqlDunningTables",
    "check_events",
    "check_invoice",
]
