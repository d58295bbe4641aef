"""Recoup's receiver as a Django app: the idempotency records and the charge ledger as models
with migrations, an admin to read them, a view decorator that verifies Standard Webhooks
signatures and runs a view at most once per delivery, the charge endpoint as one view, and
management commands to prune keys and reconcile pending charges.

    INSTALLED_APPS = [..., "recoup.contrib.django"]      # app label "recoup"
    RECOUP_SIGNING_SECRET = env("RECOUP_SIGNING_SECRET")  # whsec_…, as Recoup shows it
    RECOUP_PAYMENT_PROVIDER = "billing.payments.provider"  # for charge_view, recoup_reconcile
    RECOUP_INVOICE_BOOK = "billing.payments.Invoices"

    # urls.py: the endpoint Recoup charges through (give Recoup its URL as the charge_url)
    urlpatterns = [path("recoup/charge", charge_view())]

    # any other signed delivery (Recoup's events, a job's HTTP target), once per delivery
    @idempotent_webhook
    def recoup_event(request): ...

Then `python manage.py migrate recoup`. The parts: `webhooks` (`idempotent_webhook`,
`not_final`, `delivery`), `charging` (`charge_invoice`, `charge_response`, `ledger_entries`),
`views` (`charge_view`), `reconciling` (`reconcile_pending`), `idempotency`
(`IdempotencyRecords`), `models`, `admin`, and the commands `recoup_prune_idempotency` and
`recoup_reconcile`, and `tokens` (`verify_update_token`: the customer emails' update-card
link, checked with the same secret), and `access` (`access_of`: a customer's access state,
read from Recoup's API with `RECOUP_API_URL` and `RECOUP_API_TOKEN`). Needs
`pip install 'recoup[django]'` (and `recoup[postgres]` for PostgreSQL); importing this
package loads no model until a name is used, as Django's app loading requires.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

try:
    import django  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "recoup.contrib.django needs Django: pip install 'recoup[django]'", name=exc.name
    ) from exc

if TYPE_CHECKING:
    from recoup.contrib.django.access import access_of
    from recoup.contrib.django.charging import charge_invoice, charge_response, ledger_entries
    from recoup.contrib.django.idempotency import IdempotencyRecords
    from recoup.contrib.django.reconciling import Reconciliation, Settled, reconcile_pending
    from recoup.contrib.django.tokens import verify_update_token
    from recoup.contrib.django.views import charge_view
    from recoup.contrib.django.webhooks import (
        Delivery,
        delivery,
        idempotent_webhook,
        not_final,
    )

_HOMES = {
    "Delivery": "webhooks",
    "delivery": "webhooks",
    "idempotent_webhook": "webhooks",
    "not_final": "webhooks",
    "charge_invoice": "charging",
    "charge_response": "charging",
    "ledger_entries": "charging",
    "charge_view": "views",
    "IdempotencyRecords": "idempotency",
    "Reconciliation": "reconciling",
    "Settled": "reconciling",
    "reconcile_pending": "reconciling",
    "verify_update_token": "tokens",
    "access_of": "access",
}


def __getattr__(name: str) -> Any:
    # Models may be imported only once Django's apps are ready: the names load on first use.
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'recoup.contrib.django' has no attribute {name!r}")
    return getattr(importlib.import_module(f"recoup.contrib.django.{home}"), name)


__all__ = [
    "Delivery",
    "IdempotencyRecords",
    "Reconciliation",
    "Settled",
    "access_of",
    "charge_invoice",
    "charge_response",
    "charge_view",
    "delivery",
    "idempotent_webhook",
    "ledger_entries",
    "not_final",
    "reconcile_pending",
    "verify_update_token",
]
