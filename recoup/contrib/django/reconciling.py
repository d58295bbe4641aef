"""Settling the charges left pending (a provider call that timed out) by asking the provider
what became of each key, without waiting for Recoup's next attempt: `reconcile_pending`, run
by `manage.py recoup_reconcile` and the admin's action.

Each pending entry is settled under its invoice's lock, as a charge would be: re-read (another
request may have settled it meanwhile), `find_charge(key)`, record what the provider did, and
mark the invoice paid when that charge succeeded. A success on an invoice that is no longer
open means the customer paid twice (paid by hand, or by another attempt while this one was in
doubt): it is recorded and reported as `paid_twice`, for a refund.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from django.db import router, transaction

from recoup.contrib.django.charging import ModelLedger, lock_invoice
from recoup.contrib.django.models import ChargeRecord
from recoup.payments.provider import ChargeStatus, PaymentProvider, ProviderTimeout
from recoup.receiver.charging import InvoiceBook
from recoup.timekeeping.instants import require_aware


class Settled(StrEnum):
    PAID = "paid"  # the charge succeeded: the invoice is marked paid
    PAID_TWICE = "paid_twice"  # it succeeded, but the invoice was no longer open: refund one
    DECLINED = "declined"  # the provider declined it: recorded with its codes
    NOT_MADE = "not_made"  # the provider never made it: left pending, safe to charge again
    STILL_PENDING = "still_pending"  # the provider does not know yet (or timed out again)
    ALREADY_SETTLED = "already_settled"  # another request settled it meanwhile
    NO_INVOICE = "no_invoice"  # the invoice is gone from your table: left pending


@dataclass(frozen=True, kw_only=True)
class Reconciliation:
    """What became of one pending entry."""

    charge_key: str
    invoice_id: str
    attempt: int
    outcome: Settled
    provider_charge_id: str | None = None
    decline_code: str | None = None


def pending_keys(*, using: str, invoice_id: str | None = None) -> list[str]:
    """The provider keys left pending, by invoice and attempt."""
    rows = ChargeRecord.objects.using(using).filter(state=ChargeStatus.PENDING.value)
    if invoice_id is not None:
        rows = rows.filter(invoice_id=invoice_id)
    return list(rows.order_by("invoice_id", "attempt").values_list("charge_key", flat=True))


def reconcile_pending(
    *,
    provider: PaymentProvider,
    invoices: InvoiceBook[str],
    now: datetime,
    using: str | None = None,
    invoice_id: str | None = None,
    keys: list[str] | None = None,
) -> list[Reconciliation]:
    """Settle every pending entry (of one invoice, or the given `keys`). Each is its own
    transaction: a failure part-way keeps what was settled before it. Raises
    `ProviderUnavailable` (stop: ask again later) and django.db.DatabaseError."""
    now = require_aware("now", now).astimezone(UTC)
    alias = using or router.db_for_write(ChargeRecord)
    chosen = keys if keys is not None else pending_keys(using=alias, invoice_id=invoice_id)
    return [
        found
        for key in chosen
        if (found := _reconcile(key, provider, invoices, now, alias)) is not None
    ]


def _reconcile(
    key: str, provider: PaymentProvider, invoices: InvoiceBook[str], now: datetime, alias: str
) -> Reconciliation | None:
    first = ChargeRecord.objects.using(alias).filter(pk=key).first()
    if first is None:
        return None
    with transaction.atomic(using=alias):
        lock_invoice(alias, first.invoice_id)
        invoice = invoices.lock(alias, first.invoice_id)
        ledger = ModelLedger(alias, now)
        entry = ledger.get(key)
        if entry is None:
            return None

        def report(
            outcome: Settled, charge_id: str | None = None, decline: str | None = None
        ) -> Reconciliation:
            return Reconciliation(
                charge_key=key,
                invoice_id=entry.invoice_id,
                attempt=entry.attempt,
                outcome=outcome,
                provider_charge_id=charge_id,
                decline_code=decline,
            )

        if entry.state is not ChargeStatus.PENDING:
            return report(Settled.ALREADY_SETTLED, entry.provider_charge_id, entry.decline_code)
        if invoice is None:
            return report(Settled.NO_INVOICE)
        try:
            found = provider.find_charge(key)
        except ProviderTimeout:
            return report(Settled.STILL_PENDING)
        if found is None:
            return report(Settled.NOT_MADE)
        ledger.record(invoice, entry.attempt, key, found)
        if found.status is ChargeStatus.PENDING:
            return report(Settled.STILL_PENDING)
        if found.status is not ChargeStatus.SUCCEEDED:
            return report(Settled.DECLINED, found.id, found.decline_code)
        if not invoice.is_open:
            return report(Settled.PAID_TWICE, found.id)
        invoices.mark_paid(alias, invoice.id, found)
        return report(Settled.PAID, found.id)


__all__ = ["Reconciliation", "Settled", "pending_keys", "reconcile_pending"]
