"""`charge_view`: the whole charge endpoint Recoup calls at each retry's instant, as one Django
view (what `recoup.receiver.ChargeEndpoint` is for other frameworks):

    # urls.py
    from recoup.contrib.django import charge_view

    urlpatterns = [path("recoup/charge", charge_view())]

It is `@idempotent_webhook` around: the body parsed as a `ChargeAttempt` (422 naming the
field), `Idempotency-Key` equal to the body's `idempotency_key` (422), then `charge_invoice`
and `charge_response` (200 with the outcome; no such invoice → 404; a request that disagrees
with the invoice → 422; the provider unavailable or the database failing → 503). The provider
and the invoice book are the arguments, else the settings `RECOUP_PAYMENT_PROVIDER` and
`RECOUP_INVOICE_BOOK` (read on the first request).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.http import HttpRequest, HttpResponseBase

from recoup.contrib.django.charging import charge_invoice, charge_response
from recoup.contrib.django.conf import invoice_book, payment_provider
from recoup.contrib.django.webhooks import DEFAULT_SECRET_SETTING, delivery, idempotent_webhook
from recoup.errors import InvalidInput
from recoup.idempotency.keys import parse_key
from recoup.payments.provider import PaymentProvider
from recoup.receiver.charging import InvoiceBook
from recoup.receiver.contract import ChargeAttempt
from recoup.receiver.idempotency import DEFAULT_LOCK_TIMEOUT
from recoup.receiver.signatures import DEFAULT_TOLERANCE
from recoup.timekeeping.clock import Clock


def charge_view(
    *,
    provider: PaymentProvider | None = None,
    invoices: InvoiceBook[str] | None = None,
    secret_setting: str = DEFAULT_SECRET_SETTING,
    tolerance: timedelta = DEFAULT_TOLERANCE,
    lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
    clock: Clock | None = None,
    using: str | None = None,
) -> Callable[..., HttpResponseBase]:
    """The charge endpoint as a view (see the module docstring); the other arguments are
    `@idempotent_webhook`'s."""

    @idempotent_webhook(
        secret_setting=secret_setting,
        tolerance=tolerance,
        lock_timeout=lock_timeout,
        clock=clock,
        using=using,
    )
    def recoup_charge(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        attempt = ChargeAttempt.from_json(request.body)
        _check_key(request.headers.get("Idempotency-Key", ""), attempt)
        result = charge_invoice(
            attempt,
            provider=provider if provider is not None else payment_provider(),
            invoices=invoices if invoices is not None else invoice_book(),
            now=delivery(request).received_at,
            using=using,
        )
        return charge_response(result)

    return recoup_charge


def _check_key(header: str, attempt: ChargeAttempt) -> None:
    if not header.strip():
        raise InvalidInput("Idempotency-Key", None, "expected the header, as Recoup sends it")
    if parse_key(header) != attempt.idempotency_key:
        raise InvalidInput(
            "Idempotency-Key",
            header,
            f"expected the body's idempotency_key {attempt.idempotency_key!r}",
        )


__all__ = ["charge_view"]
