"""Prometheus metrics of a worker's process, in a registry of its own (two workers or apps in
one process, as in tests, never share or clash on the global one): the store's job gauges,
read at scrape time and cached, and the attempts of the worker that runs here. `recoup
worker --metrics-port` serves them; the HTTP API adds its request metrics (`recoup.api.metrics`).

- `recoup_jobs{state}` and `recoup_jobs_due`: read from the database at scrape time, and
  cached so that frequent scrapes (or many scrapers) cost at most one read per interval. The
  live states (scheduled, running) and the due backlog come from `count_live` and
  `due_backlog`, which walk the partial indexes of live jobs, every `LIVE_TTL`; the final states
  need a count of every finished row, so they are re-read only every `FINAL_TTL`. With tens of
  millions of jobs a scrape still answers from memory nearly always;
- `recoup_firing_lag_seconds{tenant}` (histogram) and `recoup_attempts_total{outcome,tenant}`:
  observed by the worker that runs in the same process, through its `on_attempt` hook
  (`observe_attempt`);
- `recoup_tenant_jobs{tenant,state}`, given `count_by_tenant`: every state per tenant, re-read
  every `FINAL_TTL`. Tenant labels are bounded (`recoup.jobs.tenant_metrics`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from recoup.jobs.model import Job, JobState, Run
from recoup.jobs.tenant_metrics import MAX_TENANT_LABELS, TenantJobsCollector, TenantLabels

log = logging.getLogger("recoup.metrics")

LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)  # s


LIVE_TTL = 15.0  # seconds a reading of the live states and the due backlog is served
FINAL_TTL = 300.0  # seconds a reading of the final states (a count of every row) is served
_LIVE_STATES = (JobState.SCHEDULED, JobState.RUNNING)


class _StoreCollector(Collector):
    """The store's gauges, cached (see the module docstring). `monotonic` is the clock of the
    cache (seconds)."""

    def __init__(
        self,
        count_by_state: Callable[[], Mapping[JobState, int]],
        due_backlog: Callable[[], int] | None,
        count_live: Callable[[], Mapping[JobState, int]] | None,
        *,
        live_ttl: float = LIVE_TTL,
        final_ttl: float = FINAL_TTL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._count_by_state = count_by_state
        self._due_backlog = due_backlog
        self._count_live = count_live
        self._live_ttl = live_ttl
        self._final_ttl = final_ttl
        self._monotonic = monotonic
        self._lock = threading.Lock()  # scrapes may run concurrently
        self._counts: dict[JobState, int] = {}
        self._backlog: int | None = None
        self._live_at: float | None = None
        self._final_at: float | None = None

    def describe(self) -> Iterable[Metric]:
        # Without it the registry would collect (and so fill the cache) at registration.
        yield GaugeMetricFamily("recoup_jobs", "Jobs by state (all tenants).", labels=["state"])
        yield GaugeMetricFamily("recoup_jobs_due", "Scheduled jobs whose run_at has passed.")

    def _refresh(self) -> None:
        now = self._monotonic()
        counted_all = False
        if self._final_at is None or now - self._final_at >= self._final_ttl:
            self._counts.update(self._count_by_state())
            self._final_at = now
            counted_all = True
        if self._live_at is None or now - self._live_at >= self._live_ttl:
            if not counted_all:  # (a count of every state just read the live ones too)
                live = self._count_live() if self._count_live else self._count_by_state()
                self._counts.update({state: live.get(state, 0) for state in _LIVE_STATES})
            self._backlog = self._due_backlog() if self._due_backlog else None
            self._live_at = now

    def collect(self) -> Iterable[Metric]:
        jobs = GaugeMetricFamily("recoup_jobs", "Jobs by state (all tenants).", labels=["state"])
        due = GaugeMetricFamily("recoup_jobs_due", "Scheduled jobs whose run_at has passed.")
        with self._lock:
            try:
                self._refresh()
            except Exception:  # a scrape must not fail because the database is down
                log.warning("metrics: the database did not answer", exc_info=True)
                return []
            counts = dict(self._counts)
            backlog = self._backlog
        for state in JobState:
            jobs.add_metric([state.value], counts.get(state, 0))
        result: list[Metric] = [jobs]
        if backlog is not None:
            due.add_metric([], backlog)
            result.append(due)
        return result


class JobMetrics:
    """The job metrics of one process: the store's gauges, read at scrape time, and the
    attempts of the worker that runs here (pass `observe_attempt` as its `on_attempt`)."""

    def __init__(
        self,
        *,
        count_by_state: Callable[[], Mapping[JobState, int]],
        due_backlog: Callable[[], int] | None = None,
        count_live: Callable[[], Mapping[JobState, int]] | None = None,
        count_by_tenant: Callable[[], Mapping[str, Mapping[JobState, int]]] | None = None,
        max_tenant_labels: int = MAX_TENANT_LABELS,
        live_ttl: float = LIVE_TTL,
        final_ttl: float = FINAL_TTL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(
            _StoreCollector(
                count_by_state,
                due_backlog,
                count_live,
                live_ttl=live_ttl,
                final_ttl=final_ttl,
                monotonic=monotonic,
            )
        )
        if count_by_tenant is not None:
            self.registry.register(
                TenantJobsCollector(
                    count_by_tenant, limit=max_tenant_labels, ttl=final_ttl, monotonic=monotonic
                )
            )
        self.tenant_label = TenantLabels(max_tenant_labels)
        self.firing_lag = Histogram(
            "recoup_firing_lag_seconds",
            "Delay between a job's run_at and the start of its attempt, by tenant.",
            ["tenant"],
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.attempts = Counter(
            "recoup_attempts",
            "Attempts by tenant and outcome.",
            ["tenant", "outcome"],
            registry=self.registry,
        )

    def observe_attempt(self, job: Job, run: Run) -> None:
        """Record one attempt: a `Worker`'s `on_attempt` hook."""
        tenant = self.tenant_label(job.tenant)
        self.attempts.labels(tenant, run.outcome.value).inc()
        lag = max(0.0, (run.started_at - job.run_at).total_seconds())
        self.firing_lag.labels(tenant).observe(lag)


__all__ = ["FINAL_TTL", "LAG_BUCKETS", "LIVE_TTL", "JobMetrics"]
