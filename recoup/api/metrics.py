"""Prometheus metrics of one app (or one `recoup worker`), in its own registry (two apps in one
process, as in tests, never share or clash on the global one).

- `recoup_jobs{state}` and `recoup_jobs_due`: read from the database at scrape time;
- `recoup_firing_lag_seconds` (histogram) and `recoup_attempts_total{outcome}`: observed by the
  worker that runs in the same process, through its `on_attempt` hook (`observe_attempt`);
- `recoup_http_requests_total{method,route,status}` and `recoup_http_request_duration_seconds`:
  labelled by route template (`/v1/jobs/{job_id}`), never by raw path, so ids cannot explode
  the label space.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from recoup.jobs.model import Job, JobState, Run

log = logging.getLogger("recoup.api")

LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)  # s


class _StoreCollector(Collector):
    def __init__(
        self,
        count_by_state: Callable[[], Mapping[JobState, int]],
        due_backlog: Callable[[], int] | None,
    ) -> None:
        self._count_by_state = count_by_state
        self._due_backlog = due_backlog

    def collect(self) -> Iterable[Metric]:
        jobs = GaugeMetricFamily("recoup_jobs", "Jobs by state (all tenants).", labels=["state"])
        due = GaugeMetricFamily("recoup_jobs_due", "Scheduled jobs whose run_at has passed.")
        try:
            counts = self._count_by_state()
            backlog = self._due_backlog() if self._due_backlog else None
        except Exception:  # a scrape must not fail because the database is down
            log.warning("metrics: the database did not answer", exc_info=True)
            return []
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
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_StoreCollector(count_by_state, due_backlog))
        self.firing_lag = Histogram(
            "recoup_firing_lag_seconds",
            "Delay between a job's run_at and the start of its attempt.",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.attempts = Counter(
            "recoup_attempts",
            "Attempts by outcome.",
            ["outcome"],
            registry=self.registry,
        )

    def observe_attempt(self, job: Job, run: Run) -> None:
        """Record one attempt: a `Worker`'s `on_attempt` hook."""
        self.attempts.labels(run.outcome.value).inc()
        self.firing_lag.observe(max(0.0, (run.started_at - job.run_at).total_seconds()))


class ApiMetrics(JobMetrics):
    """The metrics of one app: the job metrics and its HTTP requests."""

    def __init__(
        self,
        *,
        count_by_state: Callable[[], Mapping[JobState, int]],
        due_backlog: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(count_by_state=count_by_state, due_backlog=due_backlog)
        self.http_requests = Counter(
            "recoup_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_duration = Histogram(
            "recoup_http_request_duration_seconds",
            "HTTP request latency by route template.",
            ["route"],
            registry=self.registry,
        )


class MetricsMiddleware:
    """Counts every HTTP request by its route template and final status."""

    def __init__(self, app: ASGIApp, *, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        begun = time.perf_counter()

        async def tracking_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.http_requests.labels(scope.get("method", ""), template, str(status)).inc()
            self.metrics.http_duration.labels(template).observe(time.perf_counter() - begun)
