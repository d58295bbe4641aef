"""OpenTelemetry spans of jobs, with the `[otel]` extra (the `opentelemetry` package is imported
here, only when a `Tracing` is made): a job's creation (`recoup.job.create`, a PRODUCER span,
child of the creating request's `traceparent`; its context is what the job stores and sends),
and each attempt (`recoup.job.attempt`, a CONSUMER span: the first attempt a child of the
job's stored context, every retry a root of its own linked to it, as OpenTelemetry's
messaging conventions ask for a consumer that runs a message more than once).

A schedule's creation is a span too (`recoup.schedule.create`, PRODUCER, child of the creating
request's `traceparent`); its context is what the schedule stores and gives every job it fires.
An occurrence's attempts are each a root of their own linked to it (`recoup.link: schedule`):
a schedule runs for months, and one trace per occurrence keeps each trace to one run.

Attempt spans are written from a `Worker`'s `on_attempt(job, run)` hook, with the run's own
start and end, so the worker's hot path is untouched; a job created without a trace context
has attempt spans of their own. `recoup serve --otel` and `recoup worker --otel` export them
over OTLP/HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT`, the SDK's other `OTEL_*` variables too); tests
pass a `TracerProvider` with the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from recoup.jobs.model import Job, NewJob, Run, RunOutcome
from recoup.jobs.schedules.model import NewSchedule
from recoup.jobs.trace_context import TraceContext

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider

INSTRUMENTATION: Final = "recoup"
CREATE_SPAN: Final = "recoup.job.create"
ATTEMPT_SPAN: Final = "recoup.job.attempt"
SCHEDULE_SPAN: Final = "recoup.schedule.create"


def _ns(instant: datetime) -> int:
    return int(instant.timestamp() * 1_000_000_000)


class Tracing:
    """Spans of job creation and attempts through one OpenTelemetry `TracerProvider`."""

    def __init__(self, provider: TracerProvider) -> None:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._trace = trace
        self._propagator = TraceContextTextMapPropagator()
        self._tracer: Tracer = provider.get_tracer(INSTRUMENTATION)

    def _context(self, given: TraceContext | None) -> Any:
        """The OpenTelemetry context whose parent is `given` (an empty one for None)."""
        carrier = {} if given is None else given.headers()
        return self._propagator.extract(carrier)

    def _carrier(self, span: Any) -> TraceContext:
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=self._trace.set_span_in_context(span))
        return TraceContext(carrier["traceparent"], carrier.get("tracestate") or None)

    def created(self, job: NewJob) -> NewJob:
        """The job with the context of its creation span (child of the request's), ended now."""
        span = self._tracer.start_span(
            CREATE_SPAN,
            context=self._context(job.trace),
            kind=self._trace.SpanKind.PRODUCER,
            attributes=_attributes(job.id, job.tenant, job.name),
        )
        try:
            return replace(job, trace=self._carrier(span))
        finally:
            span.end()

    def schedule_created(self, schedule: NewSchedule) -> NewSchedule:
        """The schedule with the context of its creation span (child of the request's), ended
        now: what each of its occurrences carries."""
        attributes: dict[str, Any] = {
            "recoup.schedule.id": schedule.id,
            "recoup.tenant": schedule.tenant,
            "recoup.schedule.name": schedule.name,
        }
        span = self._tracer.start_span(
            SCHEDULE_SPAN,
            context=self._context(schedule.trace),
            kind=self._trace.SpanKind.PRODUCER,
            attributes=attributes,
        )
        try:
            return replace(schedule, trace=self._carrier(span))
        finally:
            span.end()

    def attempt(self, job: Job, run: Run) -> None:
        """One attempt's span, from its run: a child of the job's context on the first
        attempt, linked to it on a retry; a schedule's occurrence linked to the schedule's
        context on every attempt; its status an error unless it succeeded."""
        from opentelemetry.trace import Link, Status, StatusCode

        occurrence = job.schedule_id is not None
        child = run.attempt <= 1 and not occurrence
        parent = self._context(job.trace if child else None)
        links = []
        if not child and job.trace is not None:
            linked = self._trace.get_current_span(self._context(job.trace)).get_span_context()
            links.append(Link(linked, {"recoup.link": "schedule" if occurrence else "producer"}))
        attributes = _attributes(job.id, job.tenant, job.name)
        attributes["recoup.attempt"] = run.attempt
        attributes["recoup.outcome"] = run.outcome.value
        if run.status_code is not None:
            attributes["http.response.status_code"] = run.status_code
        span = self._tracer.start_span(
            ATTEMPT_SPAN,
            context=parent,
            kind=self._trace.SpanKind.CONSUMER,
            links=links,
            attributes=attributes,
            start_time=_ns(run.started_at),
        )
        if run.outcome is not RunOutcome.SUCCEEDED:
            span.set_status(Status(StatusCode.ERROR, run.error or run.outcome.value))
        span.end(end_time=max(_ns(run.finished_at), _ns(run.started_at)))


def _attributes(job_id: str, tenant: str, name: str | None) -> dict[str, Any]:
    found: dict[str, Any] = {"recoup.job.id": job_id, "recoup.tenant": tenant}
    if name is not None:
        found["recoup.job.name"] = name
    return found


def otlp_tracing() -> Tracing:
    """A `Tracing` exporting in batches over OTLP/HTTP, configured by the SDK's `OTEL_*`
    environment variables; `ModuleNotFoundError` without the `[otel]` extra."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "recoup"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return Tracing(provider)


def observing(
    *hooks: Callable[[Job, Run], None] | None,
) -> Callable[[Job, Run], None] | None:
    """One `on_attempt` hook calling each given one in turn (None when none is given)."""
    found = [hook for hook in hooks if hook is not None]
    if not found:
        return None
    if len(found) == 1:
        return found[0]

    def observe(job: Job, run: Run) -> None:
        for hook in found:
            hook(job, run)

    return observe


__all__ = [
    "ATTEMPT_SPAN",
    "CREATE_SPAN",
    "SCHEDULE_SPAN",
    "Tracing",
    "observing",
    "otlp_tracing",
]
