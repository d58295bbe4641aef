"""The app's settings, read where they are used (so `override_settings` applies):

- `RECOUP_SIGNING_SECRET`: the `whsec_…` secret Recoup signs with (a list while rotating);
  `@idempotent_webhook(secret_setting=…)` may name another setting;
- `RECOUP_PAYMENT_PROVIDER`: dotted path to the `PaymentProvider` (an object; or a class or
  factory function that makes one, called once), for `charge_view` and `recoup_reconcile`;
- `RECOUP_INVOICE_BOOK`: dotted path to the `InvoiceBook` (same rule): how to lock and read
  one of your invoices and mark it paid, given the database alias.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from recoup.payments.provider import PaymentProvider
from recoup.receiver.charging import InvoiceBook

PROVIDER_SETTING: Final = "RECOUP_PAYMENT_PROVIDER"
INVOICE_BOOK_SETTING: Final = "RECOUP_INVOICE_BOOK"


def payment_provider() -> PaymentProvider:
    """The provider `RECOUP_PAYMENT_PROVIDER` names. Raises ImproperlyConfigured."""
    found: PaymentProvider = _load(PROVIDER_SETTING, ("charge", "find_charge"))
    return found


def invoice_book() -> InvoiceBook[str]:
    """The invoice book `RECOUP_INVOICE_BOOK` names. Raises ImproperlyConfigured."""
    found: InvoiceBook[str] = _load(INVOICE_BOOK_SETTING, ("lock", "mark_paid"))
    return found


def _load(setting: str, methods: tuple[str, ...]) -> Any:
    path = getattr(settings, setting, None)
    if not path:
        raise ImproperlyConfigured(f"{setting}: set it to the dotted path of your object")
    if not isinstance(path, str):
        raise ImproperlyConfigured(f"{setting}: expected a dotted path, got {type(path).__name__}")
    return _resolve(setting, path, methods)


@functools.cache
def _resolve(setting: str, path: str, methods: tuple[str, ...]) -> Any:
    # Cached per path: a factory builds its provider (a connection pool, say) once.
    try:
        found = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(f"{setting}: cannot import {path!r}: {exc}") from None
    # A class, or a factory function, is called once; an object with the methods is used as is.
    if isinstance(found, type) or (
        callable(found) and not all(hasattr(found, name) for name in methods)
    ):
        found = found()
    missing = [name for name in methods if not callable(getattr(found, name, None))]
    if missing:
        raise ImproperlyConfigured(
            f"{setting}: {path!r} has no {' or '.join(missing)}(); expected an object with "
            f"{', '.join(m + '()' for m in methods)}, or a callable that returns one"
        )
    return found


__all__ = ["INVOICE_BOOK_SETTING", "PROVIDER_SETTING", "invoice_book", "payment_provider"]
