"""Charging one attempt at most once with the ledger in `ChargeRecord`: the receiver's own
rules (`recoup.receiver.charging.charge_locked_invoice`: lock, re-check, charge under the
provider's key, record, reconcile pending charges with `find_charge` first), in a transaction
of the Django database.

    from recoup.contrib.django import charge_invoice, charge_response

    result = charge_invoice(attempt, provider=gateway, invoices=MyInvoices(), now=now)
    return charge_response(result)

`invoices` is a `recoup.receiver.InvoiceBook` whose connection is the database alias:

    class MyInvoices:
        def lock(self, using, invoice_id):
            row = Invoice.objects.using(using).select_for_update().filter(pk=invoice_id).first()
            return None if row is None else row.as_recoup_invoice()

        def mark_paid(self, using, invoice_id, charge):
            Invoice.objects.using(using).filter(pk=invoice_id).update(
                status="paid", paid_charge_id=charge.id
            )

The invoice's lock, beside the user's `select_for_update`: on PostgreSQL the receiver's own
advisory lock on the invoice id (the very lock `recoup.receiver` takes, so both may share a
database), on SQLite the database's write lock, taken by the transaction's first statement
(a write that changes nothing) so that no read can go stale before it. The lock is held across
the provider's call: keep the provider's timeout below the key's `lock_timeout`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import connections, router, transaction
from django.db.models import F
from django.http import JsonResponse

from recoup.contrib.django.models import ChargeRecord
from recoup.contrib.django.webhooks import not_final
from recoup.payments.provider import Charge, ChargeStatus, PaymentProvider
from recoup.receiver.charging import Invoice, InvoiceBook, LedgerEntry, charge_locked_invoice
from recoup.receiver.contract import ChargeAttempt, ChargeOutcome, ChargeResult
from recoup.timekeeping.instants import require_aware

# The receiver's advisory lock (recoup/receiver/postgres.sql, lock_invoice), word for word.
_PG_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('recoup.receiver invoice ' || %s, 0))"


def charge_invoice(
    attempt: ChargeAttempt,
    *,
    provider: PaymentProvider,
    invoices: InvoiceBook[str],
    now: datetime,
    using: str | None = None,
) -> ChargeResult:
    """Charge `attempt` at most once (the rules of `recoup.receiver.charging`, in order).
    `now` stamps the ledger; `using` is the database alias (the router's choice for
    `ChargeRecord` by default), which `invoices` is given as its connection.

    Raises `UnknownInvoice`, `InvalidInput`, `ProviderUnavailable`, django.db.DatabaseError.
    """
    now = require_aware("now", now).astimezone(UTC)
    alias = using or router.db_for_write(ChargeRecord)
    with transaction.atomic(using=alias):
        lock_invoice(alias, attempt.invoice_id)
        invoice = invoices.lock(alias, attempt.invoice_id)
        return charge_locked_invoice(
            ModelLedger(alias, now),
            provider,
            invoice,
            attempt,
            mark_paid=lambda charge: invoices.mark_paid(alias, attempt.invoice_id, charge),
        )


def lock_invoice(using: str, invoice_id: str) -> None:
    """Hold the receiver's lock on `invoice_id` until the transaction ends (see the module
    docstring); call inside `transaction.atomic(using=using)`."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_PG_LOCK, [invoice_id])
    elif connection.vendor == "sqlite":
        # An UPDATE takes SQLite's write lock even when no row matches; taken first, it makes
        # the transaction a writer before it reads anything.
        ChargeRecord.objects.using(using).filter(invoice_id=invoice_id, attempt__lt=0).update(
            attempt=F("attempt")
        )
    # Elsewhere the user's SELECT … FOR UPDATE in InvoiceBook.lock is the lock.


class ModelLedger:
    """The `ChargeLedger` of `recoup.receiver.charging` on `ChargeRecord`, within the
    transaction of database `using`."""

    def __init__(self, using: str, now: datetime) -> None:
        self.using = using
        self.now = now

    def get(self, charge_key: str) -> LedgerEntry | None:
        row = ChargeRecord.objects.using(self.using).filter(pk=charge_key).first()
        return None if row is None else row.entry()

    def pending(self, invoice_id: str) -> list[LedgerEntry]:
        rows = ChargeRecord.objects.using(self.using).filter(
            invoice_id=invoice_id, state=ChargeStatus.PENDING.value
        )
        return [row.entry() for row in rows.order_by("attempt", "charge_key")]

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
        rows = ChargeRecord.objects.using(self.using)
        row = rows.filter(pk=charge_key).first()
        if row is None:
            rows.create(
                charge_key=charge_key,
                invoice_id=invoice.id,
                attempt=attempt,
                state=state.value,
                amount=charge.amount if charge else invoice.amount,
                currency=charge.currency if charge else invoice.currency,
                provider_charge_id=charge.id if charge else None,
                decline_code=charge.decline_code if charge else None,
                advice_code=charge.advice_code if charge else None,
                created_at=self.now,
                updated_at=self.now,
            )
            return
        # As the receiver's upsert: the entry keeps its invoice, attempt and amount.
        row.state = state.value
        row.provider_charge_id = charge.id if charge else None
        row.decline_code = charge.decline_code if charge else None
        row.advice_code = charge.advice_code if charge else None
        row.updated_at = max(row.created_at, self.now)
        row.save(
            update_fields=[
                "state",
                "provider_charge_id",
                "decline_code",
                "advice_code",
                "updated_at",
            ]
        )


def ledger_entries(invoice_id: str, *, using: str | None = None) -> list[LedgerEntry]:
    """The ledger of one invoice, by attempt: for reports, support and tests."""
    alias = using or router.db_for_read(ChargeRecord)
    rows = ChargeRecord.objects.using(alias).filter(invoice_id=invoice_id)
    return [row.entry() for row in rows.order_by("attempt", "charge_key")]


def charge_response(result: ChargeResult) -> JsonResponse:
    """The answer Recoup expects for `result` (200, `ChargeResult.to_json`). A pending outcome
    is `not_final`: the key is released, so Recoup's next ask reconciles through the ledger
    instead of being handed "pending" forever."""
    response = JsonResponse(result.to_json())
    if result.outcome is ChargeOutcome.PENDING:
        not_final(response)
    return response


__all__ = ["ModelLedger", "charge_invoice", "charge_response", "ledger_entries", "lock_invoice"]
