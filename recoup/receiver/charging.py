"""Charging one attempt at most once: lock the invoice, re-check it, charge under the
provider's idempotency key, record the result, all in one transaction of the handler's
database.

The user's invoice table is theirs; they give the receiver an `InvoiceBook` that locks and
reads an invoice and marks it paid, on the transaction's own connection. The receiver keeps a
ledger of its own, `receiver_charges`: one row per provider key (`charge:{invoice}:{n}`) with
the attempt, the state (`ChargeStatus`: succeeded, failed_terminal, failed_retryable, pending),
the provider's charge id and the decline and advice codes.

`charge_invoice` decides, under the invoice's lock:

1. no such invoice → `UnknownInvoice`;
2. the ledger already settled this key (a repeat of the attempt) → that result again, without
   a provider call;
3. the invoice is not open → without a charge, `already_handled` when it was paid (by an
   earlier attempt, by hand), `closed` when it was closed without a payment (voided, written
   off: `Invoice.closed_without_payment`), so that Recoup stops without counting a recovery.
   One exception: this key is pending (its charge timed out, then the invoice was closed
   another way). The provider is asked (`find_charge`) and what it did is
   booked, without marking the invoice paid by it. A success is a second payment the merchant
   must refund: it is answered `succeeded`, and Recoup raises `invoice.double_charged`;
4. the request disagrees with the invoice (amount, currency, customer) → `InvalidInput`;
5. other attempts of this invoice left pending are looked up (`find_charge`): one that
   succeeded marks the invoice paid (→ `already_handled`); one still unknown → `pending`, since
   charging another key now could charge twice;
6. this key is pending (an earlier call timed out) → `find_charge(key)` first and settle from
   what it finds; only if the provider never made it is the charge tried again, with the same
   key;
7. charge: a success marks the invoice paid; a decline is recorded with its codes;
   `ProviderTimeout` records the key as pending and answers `pending`; `ProviderUnavailable`
   propagates (nothing moved; the transaction rolls back; the endpoint answers 503 so Recoup
   retries the attempt).

The lock is held across the provider call: on PostgreSQL it is the invoice's row (and an
advisory lock), on SQLite the database's write lock. The provider's own timeout should be
shorter than the idempotency lock timeout. A handler killed between the provider's answer and
the commit leaves no ledger row; the retry of the same attempt charges again under the same
key, and the provider, idempotent by key, returns the first charge instead of making another.

The rules themselves (`charge_locked_invoice`) see the ledger through the `ChargeLedger`
protocol, so that another home for it (the Django models of `recoup.contrib.django`) follows
the very same rules; `charge_invoice` is them on the receiver's own `Database`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from recoup.errors import InvalidInput
from recoup.payments.provider import (
    Charge,
    ChargeRequest,
    ChargeStatus,
    PaymentProvider,
    ProviderTimeout,
)
from recoup.receiver.contract import (
    ALREADY_HANDLED,
    CLOSED,
    OUTCOME_OF_STATUS,
    PENDING,
    ChargeAttempt,
    ChargeResult,
)
from recoup.receiver.database import Database
from recoup.receiver.errors import UnknownInvoice
from recoup.timekeeping.instants import require_aware

C_contra = TypeVar("C_contra", contravariant=True)
C = TypeVar("C")


@dataclass(frozen=True, kw_only=True)
class Invoice:
    """What the receiver needs to know of one of the user's invoices. `is_open`: there is
    still something to collect (False once paid, voided or written off). `card`, `gateway` and
    `merchant_id` are passed on to the provider."""

    id: str
    customer_id: str
    amount: int  # minor units
    currency: str
    is_open: bool
    closed_without_payment: bool = False  # not open, and not because it was paid
    card: str | None = None
    gateway: str | None = None
    merchant_id: str | None = None


class InvoiceBook(Protocol[C_contra]):
    """The user's invoice table, reached through the receiver's transaction `conn`."""

    def lock(self, conn: C_contra, invoice_id: str) -> Invoice | None:
        """Read the invoice and lock its row until the transaction ends (PostgreSQL:
        `SELECT … FOR UPDATE`; SQLite: a plain SELECT, the transaction holds the write lock).
        None if there is no such invoice."""
        ...

    def mark_paid(self, conn: C_contra, invoice_id: str, charge: Charge) -> None:
        """Record that `charge` paid the invoice (in the same transaction as the ledger)."""
        ...


@dataclass(frozen=True, kw_only=True)
class LedgerEntry:
    """One row of `receiver_charges`: what became of one provider key."""

    charge_key: str
    invoice_id: str
    attempt: int
    state: ChargeStatus
    amount: int
    currency: str
    provider_charge_id: str | None
    decline_code: str | None
    advice_code: str | None
    created_at: datetime
    updated_at: datetime

    def result(self) -> ChargeResult:
        """The answer this entry settles its attempt with."""
        return ChargeResult(
            outcome=OUTCOME_OF_STATUS[self.state],
            decline_code=self.decline_code,
            advice_code=self.advice_code,
            charge_id=self.provider_charge_id,
        )


class ChargeLedger(Protocol):
    """The charge ledger as the rules use it, inside a transaction that holds the invoice's
    lock: one entry per provider key."""

    def get(self, charge_key: str) -> LedgerEntry | None:
        """The entry of `charge_key`, whichever invoice it belongs to."""
        ...

    def pending(self, invoice_id: str) -> list[LedgerEntry]:
        """The invoice's entries still `PENDING`, by attempt."""
        ...

    def record(self, invoice: Invoice, attempt: int, charge_key: str, charge: Charge) -> None:
        """Write what the provider did under `charge_key` (insert or overwrite the entry)."""
        ...

    def record_pending(self, invoice: Invoice, attempt: ChargeAttempt) -> None:
        """Write the attempt's key as `PENDING`: the provider's answer is unknown."""
        ...


def charge_invoice(
    database: Database[C],
    provider: PaymentProvider,
    invoices: InvoiceBook[C],
    attempt: ChargeAttempt,
    *,
    now: datetime,
) -> ChargeResult:
    """Charge `attempt` at most once (see the module docstring for the rules, in order).
    `now` stamps the ledger; the provider is told the attempt's `scheduled_at`, the instant
    that simulated gateways and test clocks go by.

    Raises `UnknownInvoice`, `InvalidInput` (a request that disagrees with the invoice or
    reuses another invoice's key), `ProviderUnavailable`, `StorageError`.
    """
    now = require_aware("now", now).astimezone(UTC)
    with database.transaction() as conn:
        database.lock_invoice(conn, attempt.invoice_id)
        invoice = invoices.lock(conn, attempt.invoice_id)
        return charge_locked_invoice(
            _Ledger(database, conn, now),
            provider,
            invoice,
            attempt,
            mark_paid=lambda charge: invoices.mark_paid(conn, attempt.invoice_id, charge),
        )


def charge_locked_invoice(
    ledger: ChargeLedger,
    provider: PaymentProvider,
    invoice: Invoice | None,
    attempt: ChargeAttempt,
    *,
    mark_paid: Callable[[Charge], None],
) -> ChargeResult:
    """The rules of the module docstring, for a caller that has begun the transaction, locked
    the invoice and read it (`invoice`, None if there is no such invoice). `mark_paid` records
    on the user's invoice, in the same transaction, that a charge paid it. Raises as
    `charge_invoice` does."""
    if invoice is None:
        raise UnknownInvoice(attempt.invoice_id)
    mine = ledger.get(attempt.charge_idempotency_key)
    if mine is not None and mine.invoice_id != attempt.invoice_id:
        raise InvalidInput(
            "charge_idempotency_key",
            attempt.charge_idempotency_key,
            f"already used for invoice {mine.invoice_id!r}; expected a key of its own",
        )
    if mine is not None and mine.state is not ChargeStatus.PENDING:
        return mine.result()
    if not invoice.is_open:
        if mine is not None:  # pending: its charge was in doubt when the invoice closed
            return _settle_after_closing(ledger, provider, invoice, mine)
        return CLOSED if invoice.closed_without_payment else ALREADY_HANDLED
    _check_matches(invoice, attempt)

    def settle(charge_key: str, entry_attempt: int, charge: Charge) -> ChargeResult:
        ledger.record(invoice, entry_attempt, charge_key, charge)
        if charge.status is ChargeStatus.SUCCEEDED:
            mark_paid(charge)
        return ChargeResult.of_charge(charge)

    for other in ledger.pending(invoice.id):
        if other.charge_key == attempt.charge_idempotency_key:
            continue
        try:
            found = provider.find_charge(other.charge_key)
        except ProviderTimeout:
            return PENDING
        if found is None:
            continue  # the provider never made it: charging this attempt is safe
        settle(other.charge_key, other.attempt, found)
        if found.status is ChargeStatus.SUCCEEDED:
            return ALREADY_HANDLED  # that attempt paid the invoice
        if found.status is ChargeStatus.PENDING:
            return PENDING  # still in flight at the provider: wait for it

    if mine is not None:
        try:
            found = provider.find_charge(attempt.charge_idempotency_key)
        except ProviderTimeout:
            return PENDING
        if found is not None:
            return settle(attempt.charge_idempotency_key, attempt.attempt, found)

    request = ChargeRequest(
        idempotency_key=attempt.charge_idempotency_key,
        invoice_id=invoice.id,
        customer_id=invoice.customer_id,
        amount=invoice.amount,
        currency=invoice.currency,
        card=invoice.card,
        gateway=invoice.gateway,
        merchant_id=invoice.merchant_id,
        at=attempt.scheduled_at,
    )
    try:
        charge = provider.charge(request)
    except ProviderTimeout:
        # The money may have moved: remember the key, so that no other charge is tried for
        # this invoice before the provider has been asked about it.
        ledger.record_pending(invoice, attempt)
        return PENDING
    return settle(attempt.charge_idempotency_key, attempt.attempt, charge)


def _settle_after_closing(
    ledger: ChargeLedger, provider: PaymentProvider, invoice: Invoice, mine: LedgerEntry
) -> ChargeResult:
    # Leaving the key pending would hide money that moved: the ledger would disagree with
    # the provider, and nobody would be told to refund the customer who paid twice.
    try:
        found = provider.find_charge(mine.charge_key)
    except ProviderTimeout:
        return PENDING
    if found is None:
        # The provider never made it, and no charge follows now.
        return CLOSED if invoice.closed_without_payment else ALREADY_HANDLED
    ledger.record(invoice, mine.attempt, mine.charge_key, found)
    return ChargeResult.of_charge(found)


def _check_matches(invoice: Invoice, attempt: ChargeAttempt) -> None:
    # The invoice in the user's database is the truth; a request that disagrees with it is
    # stale or wrong, and charging either amount could be the wrong one.
    if attempt.amount != invoice.amount:
        raise InvalidInput("amount", attempt.amount, f"expected the invoice's {invoice.amount}")
    if attempt.currency.lower() != invoice.currency.lower():
        raise InvalidInput(
            "currency", attempt.currency, f"expected the invoice's {invoice.currency!r}"
        )
    if attempt.customer_id != invoice.customer_id:
        raise InvalidInput(
            "customer_id", attempt.customer_id, f"expected the invoice's {invoice.customer_id!r}"
        )


class _Ledger:
    """`receiver_charges` within one transaction (a `ChargeLedger`)."""

    def __init__(self, database: Database[Any], conn: Any, now: datetime) -> None:
        self.db = database
        self.conn = conn
        self.now = now

    def get(self, charge_key: str) -> LedgerEntry | None:
        rows = self.db.fetch(self.conn, "get_charge", {"charge_key": charge_key})
        return _entry(self.db, rows[0]) if rows else None

    def pending(self, invoice_id: str) -> list[LedgerEntry]:
        rows = self.db.fetch(self.conn, "invoice_charges", {"invoice_id": invoice_id})
        entries = [_entry(self.db, row) for row in rows]
        return [e for e in entries if e.state is ChargeStatus.PENDING]

    def record(self, invoice: Invoice, attempt: int, charge_key: str, charge: Charge) -> None:
        self._write(invoice, attempt, charge_key, charge.status, charge)

    def record_pending(self, invoice: Invoice, attempt: ChargeAttempt) -> None:
        self._write(
            invoice, attempt.attempt, attempt.charge_idempotency_key, ChargeStatus.PENDING, None
        )

    def _write(
        self,
        invoice: Invoice,
        attempt: int,
        charge_key: str,
        state: ChargeStatus,
        charge: Charge | None,
    ) -> None:
        self.db.run(
            self.conn,
            "record_charge",
            {
                "charge_key": charge_key,
                "invoice_id": invoice.id,
                "attempt": attempt,
                "state": state.value,
                "amount": charge.amount if charge else invoice.amount,
                "currency": charge.currency if charge else invoice.currency,
                "provider_charge_id": charge.id if charge else None,
                "decline_code": charge.decline_code if charge else None,
                "advice_code": charge.advice_code if charge else None,
                "now": self.db.encode_instant(self.now),
            },
        )


def _entry(database: Database[Any], row: tuple[Any, ...]) -> LedgerEntry:
    key, invoice_id, attempt, state, amount, currency, charge_id, decline, advice, made, changed = (
        row
    )
    return LedgerEntry(
        charge_key=key,
        invoice_id=invoice_id,
        attempt=attempt,
        state=ChargeStatus(state),
        amount=amount,
        currency=currency,
        provider_charge_id=charge_id,
        decline_code=decline,
        advice_code=advice,
        created_at=database.decode_instant(made),
        updated_at=database.decode_instant(changed),
    )


def ledger_entries(database: Database[Any], invoice_id: str) -> list[LedgerEntry]:
    """The ledger of one invoice, by attempt: for reports, support and tests."""
    with database.transaction() as conn:
        rows = database.fetch(conn, "invoice_charges", {"invoice_id": invoice_id})
    return [_entry(database, row) for row in rows]


__all__ = [
    "ChargeLedger",
    "Invoice",
    "InvoiceBook",
    "LedgerEntry",
    "charge_invoice",
    "charge_locked_invoice",
    "ledger_entries",
]
