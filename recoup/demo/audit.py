"""Counting double charges after the demo, from the records of the two sides that move or
book money: the gateway (how many times money moved under each key, and per invoice) and the
billing app's database (the receiver's ledger, one row per provider key; and which invoices
were paid another way). The target is zero; any other count fails the demo.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Ledger:
    """What the billing app's database holds: the receiver's settled charges by invoice, and
    the app's invoices by status."""

    succeeded: dict[str, list[int]]  # invoice → attempts whose charge succeeded
    paid: set[str]  # invoices the app holds as paid (by a charge or another way)
    paid_without_charge: set[str]  # paid another way: no charge of ours recorded


@dataclass(frozen=True, kw_only=True)
class DoubleCharges:
    """Each list holds the invoices (or keys) charged more than once, by what saw it."""

    gateway_keys: list[str]  # one (invoice, attempt) key under which money moved twice
    gateway_invoices: list[str]  # more than one successful charge for the invoice
    ledger_invoices: list[str]  # more than one succeeded row in the receiver's ledger
    paid_out_of_band_and_charged: list[str]  # paid another way, and charged by the gateway
    money_moved: int  # successful charges at the gateway, the renewals' first tries included

    @property
    def invoices(self) -> list[str]:
        keyed = {key.split(":")[1] for key in self.gateway_keys if key.count(":") >= 2}
        found = keyed | set(self.gateway_invoices) | set(self.ledger_invoices)
        return sorted(found | set(self.paid_out_of_band_and_charged))

    @property
    def total(self) -> int:
        """Invoices charged more than once, by any count: must be 0."""
        return len(self.invoices)

    def as_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "invoices": self.invoices[:20],
            "gateway_keys_charged_twice": len(self.gateway_keys),
            "gateway_invoices_charged_twice": len(self.gateway_invoices),
            "ledger_invoices_charged_twice": len(self.ledger_invoices),
            "paid_out_of_band_and_charged": len(self.paid_out_of_band_and_charged),
            "successful_charges_at_gateway": self.money_moved,
        }


def read_ledger(billing_db: Path) -> Ledger:
    """The billing app's database, read once the app has stopped."""
    conn = sqlite3.connect(f"file:{billing_db}?mode=ro", uri=True)
    try:
        succeeded: dict[str, list[int]] = {}
        for invoice_id, attempt in conn.execute(
            "SELECT invoice_id, attempt FROM receiver_charges WHERE state = 'succeeded'"
            " ORDER BY invoice_id, attempt"
        ):
            succeeded.setdefault(invoice_id, []).append(attempt)
        rows = conn.execute("SELECT id, paid_charge_id FROM invoices WHERE status = 'paid'")
        paid: set[str] = set()
        without: set[str] = set()
        for invoice_id, charge_id in rows:
            paid.add(invoice_id)
            if charge_id is None:
                without.add(invoice_id)
    finally:
        conn.close()
    return Ledger(succeeded=succeeded, paid=paid, paid_without_charge=without)


def count_double_charges(
    gateway_stats: Mapping[str, Any], ledger: Ledger, paid_out_of_band: Iterable[str]
) -> DoubleCharges:
    """Every sign of money moved twice: keys the gateway charged twice, invoices it charged
    twice under any keys, invoices with two succeeded ledger rows, and invoices paid another
    way (`paid_out_of_band`: those the customer paid while they were still open) that the
    gateway charged as well."""
    per_key: dict[str, int] = dict(gateway_stats["charges_per_key"])
    moved = Counter[str]()
    for key, times in per_key.items():
        parts = key.split(":")
        if len(parts) >= 2 and times > 0:
            moved[parts[1]] += times
    return DoubleCharges(
        gateway_keys=sorted(key for key, times in per_key.items() if times > 1),
        gateway_invoices=sorted(gateway_stats["double_charged_invoices"]),
        ledger_invoices=sorted(i for i, attempts in ledger.succeeded.items() if len(attempts) > 1),
        paid_out_of_band_and_charged=sorted(i for i in set(paid_out_of_band) if moved[i] > 0),
        money_moved=sum(per_key.values()),
    )


__all__ = ["DoubleCharges", "Ledger", "count_double_charges", "read_ledger"]
