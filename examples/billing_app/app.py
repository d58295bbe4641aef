"""The billing app itself: its invoice table, the `InvoiceBook` that lets `recoup.receiver`
lock and pay an invoice, and the HTTP routes.

Routes:

- `POST /recoup/charge`: Recoup's retry requests (the whole of it is `recoup.receiver`);
- `POST /invoices`: create an invoice and make its first charge, as a renewal would;
- `GET /invoices`: every invoice and its status;
- `POST /invoices/{id}/paid`: the invoice was paid another way (`changed`: it was open);
- `GET /`: which gateway the app charges through (simulate.py reads it);
- `/gateway/...`: the in-process simulated gateway's own HTTP API, when no `--gateway-url`
  is given, so a script can give its cards scenarios.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictInt

from recoup.payments import SimulatedGateway, create_gateway_app
from recoup.payments.provider import (
    Charge,
    ChargeRequest,
    ChargeStatus,
    PaymentError,
    PaymentProvider,
)
from recoup.receiver import ChargeEndpoint, Invoice, SqliteDatabase
from recoup.receiver.fastapi import charge_router
from recoup.timekeeping.clock import Clock

CHARGE_PATH = "/recoup/charge"  # give Recoup {this app's URL}/recoup/charge as the charge_url

# The app's own table. `status` is all the receiver needs to know to refuse a second charge;
# `paid_charge_id` records which gateway charge paid it, for support and refunds.
SCHEMA = """
CREATE TABLE IF NOT EXISTS invoices (
    id                TEXT    PRIMARY KEY,
    customer_id       TEXT    NOT NULL,
    amount            INTEGER NOT NULL CHECK (amount > 0),  -- minor units (cents)
    currency          TEXT    NOT NULL,
    card_fingerprint  TEXT,
    status            TEXT    NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid')),
    paid_charge_id    TEXT
)
"""
COLUMNS = "id, customer_id, amount, currency, card_fingerprint, status, paid_charge_id"


class Invoices:
    """How `recoup.receiver` reads and pays our invoices, inside its own transaction."""

    def lock(self, conn: sqlite3.Connection, invoice_id: str) -> Invoice | None:
        # On SQLite the receiver's transaction began with BEGIN IMMEDIATE, so it already holds
        # the database's write lock: this plain SELECT cannot race another charge. (On
        # PostgreSQL, write `SELECT … FOR UPDATE` here to lock the invoice's row.)
        row = conn.execute(
            "SELECT id, customer_id, amount, currency, card_fingerprint, status"
            " FROM invoices WHERE id = ?",
            (invoice_id,),
        ).fetchone()
        if row is None:
            return None
        id_, customer_id, amount, currency, card, status = row
        return Invoice(
            id=id_,
            customer_id=customer_id,
            amount=amount,
            currency=currency,
            card=card,
            is_open=status == "open",  # a paid invoice answers "already_handled", uncharged
            gateway="simulated",
        )

    def mark_paid(self, conn: sqlite3.Connection, invoice_id: str, charge: Charge) -> None:
        # Same transaction as the receiver's ledger row: both are stored, or neither.
        conn.execute(
            "UPDATE invoices SET status = 'paid', paid_charge_id = ? WHERE id = ?",
            (charge.id, invoice_id),
        )


class NewInvoice(BaseModel):
    """`POST /invoices`: an invoice to create and charge once (`charge_at`: the instant the
    gateway is told, so a simulated run can live on Recoup's test clock)."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, Field(min_length=1, max_length=100)]
    customer_id: Annotated[str, Field(min_length=1, max_length=100)]
    amount: Annotated[StrictInt, Field(gt=0)]
    currency: Annotated[str, Field(pattern="^[a-z]{3}$")]
    card_fingerprint: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    charge_at: AwareDatetime | None = None


def create_app(
    *,
    db_path: str | Path,
    secret: str,
    provider: PaymentProvider,
    gateway_url: str | None = None,
    clock: Clock | None = None,
    synchronous: str = "FULL",
) -> FastAPI:
    """The app on the SQLite file `db_path`, verifying Recoup's requests with `secret` and
    charging through `provider` (`gateway_url`: where that gateway is served, if remote).
    `clock` is the real clock that signatures are checked against (tests freeze it);
    `synchronous` is SQLite's (NORMAL: fewer fsyncs, for a throwaway database such as the
    demo's)."""
    database = SqliteDatabase(db_path, synchronous=synchronous)
    database.ensure_schema()  # the receiver's tables: idempotency keys and its charge ledger
    with database.transaction() as conn:
        conn.execute(SCHEMA)
    invoices = Invoices()

    # The charge endpoint: signature check, idempotency keys, lock-recheck-charge-record and
    # reconciliation of timed-out charges all happen inside recoup.receiver.
    endpoint = ChargeEndpoint(
        database=database, provider=provider, invoices=invoices, secret=secret
    )
    app = FastAPI(title="Billing app (a Recoup example)")
    app.include_router(charge_router(endpoint, path=CHARGE_PATH, clock=clock))

    if isinstance(provider, SimulatedGateway):
        # Serve the in-process gateway too, so simulate.py can give cards their scenarios.
        app.mount("/gateway", create_gateway_app(provider))

    @app.get("/")
    def about() -> dict[str, Any]:
        return {
            "charge_path": CHARGE_PATH,
            "gateway_url": gateway_url,
            "in_process_gateway": gateway_url is None,
        }

    @app.get("/invoices")
    def list_invoices() -> dict[str, Any]:
        with database.transaction() as conn:
            rows = conn.execute(f"SELECT {COLUMNS} FROM invoices ORDER BY id").fetchall()
        names = [c.strip() for c in COLUMNS.split(",")]
        return {"invoices": [dict(zip(names, row, strict=True)) for row in rows]}

    @app.post("/invoices")
    def create_invoice(new: NewInvoice) -> JSONResponse:
        # The first charge of a renewal. Its key is derived from the invoice, so creating the
        # same invoice again (a retried request) never charges twice: the gateway returns the
        # first charge.
        try:
            with database.transaction() as conn:
                conn.execute(
                    "INSERT INTO invoices (id, customer_id, amount, currency, card_fingerprint)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                    (new.id, new.customer_id, new.amount, new.currency, new.card_fingerprint),
                )
                invoice = invoices.lock(conn, new.id)
                assert invoice is not None  # inserted above, in this transaction
                if not invoice.is_open:
                    return JSONResponse({"id": new.id, "status": "paid", "charge": None})
                charge = provider.charge(
                    ChargeRequest(
                        idempotency_key=f"initial:{new.id}",
                        invoice_id=invoice.id,
                        customer_id=invoice.customer_id,
                        amount=invoice.amount,
                        currency=invoice.currency,
                        card=invoice.card,
                        gateway=invoice.gateway,
                        at=new.charge_at,
                    )
                )
                if charge.status is ChargeStatus.SUCCEEDED:
                    invoices.mark_paid(conn, invoice.id, charge)
        except PaymentError as exc:
            # A timeout or an outage: the transaction rolled back, nothing is recorded; the
            # caller retries the same request and the gateway's key keeps it to one charge.
            return JSONResponse({"detail": str(exc)}, status_code=503)
        status = "paid" if charge.status is ChargeStatus.SUCCEEDED else "open"
        body = {
            "id": new.id,
            "status": status,
            "charge": {
                "id": charge.id,
                "status": charge.status.value,
                "decline_code": charge.decline_code,
                "advice_code": charge.advice_code,
            },
        }
        return JSONResponse(body, status_code=201)

    @app.post("/invoices/{invoice_id}/paid")
    def paid_out_of_band(invoice_id: str) -> JSONResponse:
        # Paid another way (a bank transfer, a check): closed here first, so a retry that
        # Recoup still sends is answered already_handled, uncharged. Then tell Recoup
        # (POST /v1/dunning/invoices/{id}/paid), which cancels the attempts left.
        with database.transaction() as conn:
            invoice = invoices.lock(conn, invoice_id)
            if invoice is None:
                return JSONResponse({"detail": f"no invoice {invoice_id!r}"}, status_code=404)
            if invoice.is_open:
                conn.execute("UPDATE invoices SET status = 'paid' WHERE id = ?", (invoice_id,))
        return JSONResponse({"id": invoice_id, "status": "paid", "changed": invoice.is_open})

    return app
