"""Fixtures of the receiver's tests: the handler's database on each backend, with a user's
invoice table in it, signed requests, and the simulated gateway.

SQLite gets a file in the test's temporary directory; PostgreSQL a fresh schema with a random
name, dropped afterwards, because several engineers and CI share one database.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp

from recoup.jobs.signing import new_signing_secret, signature_headers
from recoup.payments import SimulatedGateway
from recoup.payments.provider import Charge
from recoup.receiver import Database, Invoice, PostgresDatabase, SqliteDatabase
from recoup.timekeeping.clock import VirtualClock

NOW = datetime(2026, 12, 2, 16, 12, tzinfo=UTC)  # the instant requests are received in tests
SECRET = new_signing_secret()


class SqliteInvoices:
    """A user's invoice table on SQLite, and its `InvoiceBook`."""

    create = """CREATE TABLE invoices (
        id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, amount INTEGER NOT NULL,
        currency TEXT NOT NULL, card TEXT, status TEXT NOT NULL, paid_by TEXT)"""

    def lock(self, conn: sqlite3.Connection, invoice_id: str) -> Invoice | None:
        row = conn.execute(
            "SELECT id, customer_id, amount, currency, card, status FROM invoices WHERE id = ?",
            (invoice_id,),
        ).fetchone()
        return None if row is None else _invoice(row)

    def mark_paid(self, conn: sqlite3.Connection, invoice_id: str, charge: Charge) -> None:
        conn.execute(
            "UPDATE invoices SET status = 'paid', paid_by = ? WHERE id = ?", (charge.id, invoice_id)
        )


class PostgresInvoices:
    """The same table on PostgreSQL; `lock` takes the row with FOR UPDATE."""

    create = SqliteInvoices.create

    def lock(self, conn: Any, invoice_id: str) -> Invoice | None:
        row = conn.execute(
            "SELECT id, customer_id, amount, currency, card, status FROM invoices"
            " WHERE id = %s FOR UPDATE",
            (invoice_id,),
        ).fetchone()
        return None if row is None else _invoice(row)

    def mark_paid(self, conn: Any, invoice_id: str, charge: Charge) -> None:
        conn.execute(
            "UPDATE invoices SET status = 'paid', paid_by = %s WHERE id = %s",
            (charge.id, invoice_id),
        )


def _invoice(row: tuple[Any, ...]) -> Invoice:
    id_, customer, amount, currency, card, status = row
    return Invoice(
        id=id_,
        customer_id=customer,
        amount=amount,
        currency=currency,
        card=card,
        is_open=status == "open",
        closed_without_payment=status == "void",
    )


@dataclass
class Db:
    """The handler's database on one backend, with the user's invoice table in it."""

    name: str
    database: Database[Any]
    invoices: Any  # SqliteInvoices | PostgresInvoices

    def _sql(self, text: str) -> str:
        return text if self.name == "sqlite" else text.replace("?", "%s")

    def execute(self, text: str, *params: object) -> list[tuple[Any, ...]]:
        with self.database.transaction() as conn:
            cursor = conn.execute(self._sql(text), params)
            return list(cursor.fetchall()) if cursor.description else []

    def add_invoice(
        self,
        invoice_id: str = "inv_1",
        *,
        amount: int = 1999,
        card: str | None = "card_ok",
        customer_id: str = "cus_1",
    ) -> None:
        self.execute(
            "INSERT INTO invoices (id, customer_id, amount, currency, card, status)"
            " VALUES (?, ?, ?, 'usd', ?, 'open')",
            invoice_id,
            customer_id,
            amount,
            card,
        )

    def status(self, invoice_id: str = "inv_1") -> str:
        return str(self.execute("SELECT status FROM invoices WHERE id = ?", invoice_id)[0][0])

    def pay_by_hand(self, invoice_id: str = "inv_1") -> None:
        self.execute("UPDATE invoices SET status = 'paid' WHERE id = ?", invoice_id)


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    if request.param == "sqlite":
        found = Db("sqlite", SqliteDatabase(tmp_path / "billing.db"), SqliteInvoices())
        found.database.ensure_schema()
        found.execute(SqliteInvoices.create)
        yield found
        found.database.close()
        return
    import psycopg

    url: str = request.getfixturevalue("postgres_url")
    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        database = PostgresDatabase.connect(url, schema=schema, max_size=6)
        try:
            found = Db("postgres", database, PostgresInvoices())
            database.ensure_schema()
            found.execute(PostgresInvoices.create)
            yield found
        finally:
            database.close()
    finally:
        _drop_schema(url, schema)


@pytest.fixture
def gateway() -> SimulatedGateway:
    """A gateway on which every card succeeds unless a test says otherwise."""
    return SimulatedGateway(VirtualClock(NOW), seed=1)


def body_of(
    invoice_id: str = "inv_1",
    attempt: int = 2,
    *,
    amount: int = 1999,
    customer_id: str = "cus_1",
    scheduled_at: datetime = NOW,
) -> dict[str, Any]:
    """A request body as Recoup sends it (the contract's example by default)."""
    return {
        "invoice_id": invoice_id,
        "attempt": attempt,
        "idempotency_key": f"retry:{invoice_id}:{attempt}",
        "charge_idempotency_key": f"charge:{invoice_id}:{attempt}",
        "amount": amount,
        "currency": "usd",
        "customer_id": customer_id,
        "scheduled_at": scheduled_at.isoformat().replace("+00:00", "Z"),
    }


def signed(
    body: dict[str, Any] | bytes,
    *,
    secret: str = SECRET,
    at: datetime = NOW,
    message_id: str | None = None,
) -> tuple[dict[str, str], bytes]:
    """Headers and raw body of a request signed as Recoup signs it."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    data = json.loads(raw) if raw.strip().startswith(b"{") else {}
    key = data.get("idempotency_key", "retry:inv_1:2")
    headers = signature_headers(
        secret=secret, message_id=message_id or f"job_{key}", timestamp=at, body=raw.decode()
    )
    headers |= {"Idempotency-Key": key, "Content-Type": "application/json"}
    return headers, raw


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


class InProcess(httpx.BaseTransport):
    """A synchronous httpx transport that runs each request through an ASGI app on a fresh
    event loop (Starlette's TestClient would warn, an error here, without `httpx2`). Threads
    may send concurrently: each request gets its own loop, and the app's blocking work still
    goes to its thread pool, as under uvicorn."""

    def __init__(self, app: ASGIApp) -> None:
        # raise_app_exceptions=False: an unhandled error is answered 500, as a server would.
        self._asgi = httpx.ASGITransport(app=app, raise_app_exceptions=False)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def call() -> httpx.Response:
            response = await self._asgi.handle_async_request(request)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=content)

        return asyncio.run(call())


def in_process(app: ASGIApp) -> httpx.Client:
    return httpx.Client(transport=InProcess(app), base_url="http://billing.test")
