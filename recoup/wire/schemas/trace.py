"""The trace context a job or a schedule carries (`recoup.jobs.trace_context`), as answered:
the W3C `traceparent` and `tracestate` it stores and sends, with their rules stated."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from recoup.jobs.trace_context import TRACEPARENT_PATTERN, TRACESTATE_MAX, TraceContext


class TracedOut(BaseModel):
    """The fields of an answer that carries a trace context."""

    traceparent: str | None = Field(
        default=None,
        pattern=TRACEPARENT_PATTERN,
        description="The W3C `traceparent` stored and sent on every delivery: the creating "
        "request's `traceparent` header (a schedule's occurrence: the schedule's), or the "
        "context of the creation span when the server traces with OpenTelemetry; null when "
        "none was given.",
    )
    tracestate: str | None = Field(
        default=None,
        max_length=TRACESTATE_MAX,
        description="The W3C `tracestate` sent with `traceparent` (its members comma-separated, "
        "as given); null when none was given, and always without a `traceparent`.",
    )

    @staticmethod
    def trace_of(trace: TraceContext | None) -> dict[str, Any]:
        """The keywords of these fields for `trace`."""
        if trace is None:
            return {"traceparent": None, "tracestate": None}
        return {"traceparent": trace.traceparent, "tracestate": trace.tracestate}


__all__ = ["TracedOut"]
