"""The dunning figures `/metrics` exposes, per tenant: invoices by state, amounts by state and
currency (recovered, at risk while retrying or awaiting the customer, lost once exhausted),
attempts by state, double charges. `DunningFigures` is what a store reads in three grouped
statements (`dunning_figures`); `bounded` keeps the `limit` tenants with the most invoices by
name and sums the rest under `_other`, as `recoup.jobs.tenant_metrics` bounds the job metrics.
Plain data (the core install has no prometheus_client): `recoup.api.dunning_metrics` makes
the Prometheus families."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

# Tenant names start with a letter or a digit: never a real one (as `jobs.tenant_metrics`).
OTHER = "_other"

# What an amount in a state means to the person reading the dashboard.
AMOUNT_KINDS = {
    "recovered": "recovered",
    "retrying": "at_risk",
    "awaiting_customer": "at_risk",
    "exhausted": "lost",
    "cancelled": "stopped",
}


@dataclass
class TenantFigures:
    invoices: dict[str, int] = field(default_factory=dict)  # state → count
    amounts: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, currency) → minor
    attempts: dict[str, int] = field(default_factory=dict)  # attempt state → count
    double_charges: int = 0

    def add(self, other: TenantFigures) -> None:
        for target, source in (
            (self.invoices, other.invoices),
            (self.attempts, other.attempts),
        ):
            for key, n in source.items():
                target[key] = target.get(key, 0) + n
        for pair, n in other.amounts.items():
            self.amounts[pair] = self.amounts.get(pair, 0) + n
        self.double_charges += other.double_charges


DunningFigures = dict[str, TenantFigures]  # tenant → its figures

# The kinds a page shows, in the order it shows them (every currency gets each, 0 included).
MONEY_KINDS = ("recovered", "at_risk", "lost", "stopped")


def money_by_currency(figures: TenantFigures) -> dict[str, dict[str, int]]:
    """A tenant's amounts as currency → kind → minor units, each kind of `MONEY_KINDS` present
    (0 when none), currencies in alphabetical order: the totals of the dashboard's invoices page
    and of the recovery report, the same sums as `/metrics`' `recoup_dunning_amount_minor`."""
    currencies = sorted({currency for _, currency in figures.amounts})
    return {
        currency: {kind: figures.amounts.get((kind, currency), 0) for kind in MONEY_KINDS}
        for currency in currencies
    }


def figures_from_rows(
    invoices: Iterable[tuple[str, str, str, int, int]],
    attempts: Iterable[tuple[str, str, int]],
    double_charges: Iterable[tuple[str, int]],
) -> DunningFigures:
    """The figures from the rows of the three grouped statements."""
    figures: defaultdict[str, TenantFigures] = defaultdict(TenantFigures)
    for tenant, state, currency, count, total in invoices:
        own = figures[tenant]
        own.invoices[state] = own.invoices.get(state, 0) + int(count)
        pair = (AMOUNT_KINDS.get(state, state), currency.lower())
        own.amounts[pair] = own.amounts.get(pair, 0) + int(total or 0)
    for tenant, state, count in attempts:
        figures[tenant].attempts[state] = int(count)
    for tenant, count in double_charges:
        figures[tenant].double_charges = int(count)
    return dict(figures)


def bounded(figures: DunningFigures, limit: int) -> DunningFigures:
    """The `limit` tenants with the most invoices by name (ties by id: a scrape is stable),
    the others summed under `OTHER`."""
    ranked = sorted(figures, key=lambda t: (-sum(figures[t].invoices.values()), t))
    shown = {tenant: figures[tenant] for tenant in ranked[:limit]}
    if ranked[limit:]:
        rest = TenantFigures()
        for tenant in ranked[limit:]:
            rest.add(figures[tenant])
        shown[OTHER] = rest
    return shown


__all__ = [
    "AMOUNT_KINDS",
    "MONEY_KINDS",
    "OTHER",
    "DunningFigures",
    "TenantFigures",
    "bounded",
    "figures_from_rows",
    "money_by_currency",
]
