"""`/metrics`' dunning families from `recoup.recovery.figures`, read from the store at most
every `ttl` seconds and bounded in tenants as the job metrics are."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from recoup.jobs.tenant_metrics import MAX_TENANT_LABELS
from recoup.recovery.figures import DunningFigures, bounded

log = logging.getLogger("recoup.metrics")


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


__all__ = ["DunningCollector"]
