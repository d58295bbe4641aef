"""The dunning figures `/metrics` exposes, per tenant: invoices by state, amounts by state and
currency (recovered, at risk while retrying or awaiting the customer, lost once exhausted),
attempts by state, double charges. `DunningFigures` is what a store reads in three grouped
statements (`dunning_figures`); `DunningCollector` turns it into Prometheus families, the
`limit` tenants with the most invoices by name and the rest summed under `_other`, as
`recoup.jobs.tenant_metrics` bounds the job metrics, and reads the store at most every `ttl`
seconds."""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from recoup.jobs.tenant_metrics import MAX_TENANT_LABELS, OTHER

log = logging.getLogger("recoup.metrics")

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


class DunningCollector(Collector):
    """`recoup_dunning_invoices{tenant,state}`, `recoup_dunning_amount_minor{tenant,kind,
    currency}` (kind: recovered, at_risk, lost, stopped), `recoup_dunning_attempts{tenant,
    state}` and `recoup_dunning_double_charges_total{tenant}`."""

    def __init__(
        self,
        read: Callable[[], DunningFigures],
        *,
        limit: int = MAX_TENANT_LABELS,
        ttl: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._limit = limit
        self._ttl = ttl
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._figures: DunningFigures = {}
        self._read_at: float | None = None

    def _families(self) -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily,
                                 CounterMetricFamily]:  # fmt: skip
        return (
            GaugeMetricFamily(
                "recoup_dunning_invoices", "Invoices in dunning by tenant and state.",
                labels=["tenant", "state"],
            ),
            GaugeMetricFamily(
                "recoup_dunning_amount_minor",
                "Invoice amounts in minor units by tenant, kind (recovered, at_risk, lost,"
                " stopped) and currency.",
                labels=["tenant", "kind", "currency"],
            ),
            GaugeMetricFamily(
                "recoup_dunning_attempts", "Charge attempts by tenant and state.",
                labels=["tenant", "state"],
            ),
            CounterMetricFamily(
                "recoup_dunning_double_charges",
                "Charges that landed for an invoice already recovered (refunds to make).",
                labels=["tenant"],
            ),
        )  # fmt: skip

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            now = self._monotonic()
            if self._read_at is None or now - self._read_at >= self._ttl:
                try:
                    self._figures = bounded(self._read(), self._limit)
                except Exception:  # a scrape must not fail because the database is down
                    log.warning("metrics: the database did not answer", exc_info=True)
                    return []
                self._read_at = now
            figures = self._figures
        invoices, amounts, attempts, doubles = self._families()
        for tenant, own in sorted(figures.items()):
            for state, n in sorted(own.invoices.items()):
                invoices.add_metric([tenant, state], n)
            for (kind, currency), total in sorted(own.amounts.items()):
                amounts.add_metric([tenant, kind, currency], total)
            for state, n in sorted(own.attempts.items()):
                attempts.add_metric([tenant, state], n)
            doubles.add_metric([tenant], own.double_charges)
        return [invoices, amounts, attempts, doubles]


__all__ = [
    "AMOUNT_KINDS",
    "DunningCollector",
    "DunningFigures",
    "TenantFigures",
    "bounded",
    "figures_from_rows",
]
