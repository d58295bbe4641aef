"""Prometheus metrics of the HTTP API: the job metrics of its process (`recoup.jobs.metrics`)
plus `recoup_http_requests_total{method,route,status}` and
`recoup_http_request_duration_seconds`, labelled by route template (`/v1/jobs/{job_id}`), never
by raw path, so ids cannot explode the label space; and the dunning figures per tenant
(`recoup.recovery.figures`), bounded as the job metrics are."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from recoup.api.dunning_metrics import DunningCollector
from recoup.jobs.metrics import FINAL_TTL, LIVE_TTL, JobMetrics
from recoup.jobs.model import JobState
from recoup.jobs.tenant_metrics import MAX_TENANT_LABELS
from recoup.recovery.figures import DunningFigures


class ApiMetrics(JobMetrics):
    """The metrics of one app: the job metrics and its HTTP requests."""

    def __init__(
        self,
        *,
        count_by_state: Callable[[], Mapping[JobState, int]],
        due_backlog: Callable[[], int] | None = None,
        count_live: Callable[[], Mapping[JobState, int]] | None = None,
        count_by_tenant: Callable[[], Mapping[str, Mapping[JobState, int]]] | None = None,
        dunning_figures: Callable[[], DunningFigures] | None = None,
        max_tenant_labels: int = MAX_TENANT_LABELS,
        live_ttl: float = LIVE_TTL,
        final_ttl: float = FINAL_TTL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            count_by_state=count_by_state,
            due_backlog=due_backlog,
            count_live=count_live,
            count_by_tenant=count_by_tenant,
            max_tenant_labels=max_tenant_labels,
            live_ttl=live_ttl,
            final_ttl=final_ttl,
            monotonic=monotonic,
        )
        if dunning_figures is not None:
            self.registry.register(
                DunningCollector(dunning_figures, limit=max_tenant_labels, ttl=final_ttl)
            )
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
