"""Per-tenant labels on the metrics, bounded: a Prometheus series per tenant costs memory in
every scraper, and a service with thousands of tenants must not explode it.

- `TenantLabels`: the label of a tenant in the attempt counters and the firing-lag histogram.
  The first `limit` tenants seen by this process keep their own name; later ones share
  `OTHER`, so a process never holds more than `limit + 1` series per metric.
- `TenantJobsCollector`: `recoup_tenant_jobs{tenant,state}`, read from the store at most every
  `FINAL_TTL` (it counts every row, grouped by tenant). The `limit` tenants with the most jobs
  are named; the rest are summed under `OTHER`, so the totals stay those of `recoup_jobs`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from recoup.jobs.model import JobState

log = logging.getLogger("recoup.metrics")

# Tenant names start with a letter or a digit (`recoup tenants create`): never a real one.
OTHER = "_other"
MAX_TENANT_LABELS = 50


class TenantLabels:
    """The label of each tenant: its id for the first `limit` seen, `OTHER` after."""

    def __init__(self, limit: int = MAX_TENANT_LABELS) -> None:
        if limit < 0:
            raise ValueError(f"limit: {limit} is not valid; expected 0 or more")
        self._limit = limit
        self._named: set[str] = set()
        self._lock = threading.Lock()  # attempts are observed from several threads

    def __call__(self, tenant: str) -> str:
        if tenant in self._named:
            return tenant
        with self._lock:
            if len(self._named) < self._limit:
                self._named.add(tenant)
                return tenant
        return OTHER


def _bounded(
    counts: Mapping[str, Mapping[JobState, int]], limit: int
) -> dict[str, dict[JobState, int]]:
    """The `limit` tenants with the most jobs by name (ties broken by id, so a scrape is
    stable), the others summed under `OTHER`."""
    ranked = sorted(counts, key=lambda tenant: (-sum(counts[tenant].values()), tenant))
    shown = {tenant: dict(counts[tenant]) for tenant in ranked[:limit]}
    rest = ranked[limit:]
    if rest:
        shown[OTHER] = {
            state: sum(counts[tenant].get(state, 0) for tenant in rest) for state in JobState
        }
    return shown


class TenantJobsCollector(Collector):
    """`recoup_tenant_jobs{tenant,state}`, cached for `ttl` seconds of `monotonic`."""

    NAME = "recoup_tenant_jobs"
    HELP = "Jobs by tenant and state (the largest tenants by name, the rest as _other)."

    def __init__(
        self,
        count_by_tenant: Callable[[], Mapping[str, Mapping[JobState, int]]],
        *,
        limit: int = MAX_TENANT_LABELS,
        ttl: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._count_by_tenant = count_by_tenant
        self._limit = limit
        self._ttl = ttl
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._counts: dict[str, dict[JobState, int]] = {}
        self._read_at: float | None = None

    def describe(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(self.NAME, self.HELP, labels=["tenant", "state"])

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=["tenant", "state"])
        with self._lock:
            now = self._monotonic()
            if self._read_at is None or now - self._read_at >= self._ttl:
                try:
                    self._counts = _bounded(self._count_by_tenant(), self._limit)
                except Exception:  # a scrape must not fail because the database is down
                    log.warning("metrics: the database did not answer", exc_info=True)
                    return []
                self._read_at = now
            counts = self._counts
        for tenant, states in sorted(counts.items()):
            for state in JobState:
                family.add_metric([tenant, state.value], states.get(state, 0))
        return [family]


__all__ = ["MAX_TENANT_LABELS", "OTHER", "TenantJobsCollector", "TenantLabels"]
