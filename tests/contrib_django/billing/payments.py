"""How the billing app pays: the `InvoiceBook` over its `Invoice` model, and the provider the
settings name (the test's own simulated gateway, set by a fixture)."""

from __future__ import annotations

from recoup.payments.provider import Charge, ChargeRequest, PaymentProvider
from recoup.receiver import Invoice as RecoupInvoice
from tests.contrib_django.billing.models import Invoice


class Crash(Exception):
    """The handler dying between the provider's answer and the commit."""


class Invoices:
    """`InvoiceBook[str]`: the connection is the database alias. `crashes` makes the next
    that many `mark_paid` calls raise, as a handler killed before its commit would."""

    crashes = 0
    for_update = True  # False: a book that forgot SELECT … FOR UPDATE

    def lock(self, using: str, invoice_id: str) -> RecoupInvoice | None:
        rows = Invoice.objects.using(using)
        if Invoices.for_update:
            rows = rows.select_for_update()
        row = rows.filter(pk=invoice_id).first()
        return None if row is None else row.as_recoup_invoice()

    def mark_paid(self, using: str, invoice_id: str, charge: Charge) -> None:
        if Invoices.crashes:
            Invoices.crashes -= 1
            raise Crash("killed after the charge, before the commit")
        Invoice.objects.using(using).filter(pk=invoice_id).update(
            status="paid", paid_charge_id=charge.id
        )


class CurrentProvider:
    """The provider of the running test (`settings.RECOUP_PAYMENT_PROVIDER` names this one
    object, which forwards to it)."""

    def __init__(self) -> None:
        self.current: PaymentProvider | None = None

    def _provider(self) -> PaymentProvider:
        if self.current is None:
            raise RuntimeError("no provider: use the `gateway` fixture")
        return self.current

    def charge(self, request: ChargeRequest) -> Charge:
        return self._provider().charge(request)

    def find_charge(self, idempotency_key: str) -> Charge | None:
        return self._provider().find_charge(idempotency_key)


provider = CurrentProvider()
