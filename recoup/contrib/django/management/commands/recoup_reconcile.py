"""`manage.py recoup_reconcile [--invoice ID] [--list] [--json] [--database ALIAS]`: settle the
charges left pending (a provider call that timed out) by asking the provider about each key
(`reconcile_pending`), without waiting for Recoup's next attempt.

One line per pending charge: its key, invoice, attempt and what became of it (`paid`,
`declined`, `not_made`, `still_pending`, `paid_twice`, `already_settled`, `no_invoice`);
`--json` prints a list of objects with those fields instead. `--list` only lists the pending
charges, asking the provider nothing. Exit status: 0; 1 when some charge paid an invoice twice
(a refund is due) or the provider is unavailable; 2 on bad options or settings.

Needs `RECOUP_PAYMENT_PROVIDER` and `RECOUP_INVOICE_BOOK`. Run it after a provider outage, or
every few minutes from cron.
"""

from __future__ import annotations

import json
from argparse import ArgumentParser
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS

from recoup.contrib.django.conf import invoice_book, payment_provider
from recoup.contrib.django.management.commands.recoup_prune_idempotency import database_alias
from recoup.contrib.django.models import ChargeRecord
from recoup.contrib.django.reconciling import Settled, pending_keys, reconcile_pending
from recoup.payments.provider import ProviderUnavailable
from recoup.timekeeping.instants import format_utc


class Command(BaseCommand):
    help = "Ask the payment provider about every pending charge and settle it in the ledger."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--invoice", help="only this invoice's pending charges")
        parser.add_argument(
            "--list", action="store_true", help="list the pending charges; ask nothing"
        )
        parser.add_argument("--json", action="store_true", help="print JSON instead of lines")
        parser.add_argument(
            "--database", default=DEFAULT_DB_ALIAS, help="database alias (default %(default)s)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        alias = database_alias(options["database"])
        if options["list"]:
            self._list(alias, options["invoice"], as_json=options["json"])
            return
        try:
            provider, invoices = payment_provider(), invoice_book()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc), returncode=2) from None
        try:
            found = reconcile_pending(
                provider=provider,
                invoices=invoices,
                now=datetime.now(UTC),
                using=alias,
                invoice_id=options["invoice"],
            )
        except ProviderUnavailable as exc:
            raise CommandError(f"the provider is unavailable: {exc}", returncode=1) from None
        if options["json"]:
            rows = [asdict(r) | {"outcome": r.outcome.value} for r in found]
            self.stdout.write(json.dumps(rows, indent=2))
        else:
            for r in found:
                detail = r.provider_charge_id or ""
                if r.decline_code:
                    detail += f" ({r.decline_code})"
                self.stdout.write(
                    f"{r.charge_key}  invoice {r.invoice_id}  attempt {r.attempt}  "
                    f"{r.outcome.value}  {detail}".rstrip()
                )
            if not found:
                self.stdout.write("no pending charges")
        twice = [r.charge_key for r in found if r.outcome is Settled.PAID_TWICE]
        if twice:
            raise CommandError(
                f"{len(twice)} charge(s) paid an invoice that was already paid, refund: "
                + ", ".join(twice),
                returncode=1,
            )

    def _list(self, alias: str, invoice_id: str | None, *, as_json: bool) -> None:
        keys = pending_keys(using=alias, invoice_id=invoice_id)
        rows = ChargeRecord.objects.using(alias).filter(pk__in=keys)
        entries = sorted((row.entry() for row in rows), key=lambda e: (e.invoice_id, e.attempt))
        if as_json:
            listed = [
                {
                    "charge_key": e.charge_key,
                    "invoice_id": e.invoice_id,
                    "attempt": e.attempt,
                    "amount": e.amount,
                    "currency": e.currency,
                    "pending_since": format_utc(e.updated_at),
                }
                for e in entries
            ]
            self.stdout.write(json.dumps(listed, indent=2))
            return
        for e in entries:
            self.stdout.write(
                f"{e.charge_key}  invoice {e.invoice_id}  attempt {e.attempt}  "
                f"{e.amount} {e.currency}  pending since {format_utc(e.updated_at)}"
            )
        if not entries:
            self.stdout.write("no pending charges")
