"""The creating request's W3C Trace Context (`traceparent`, `tracestate`) for the jobs and
schedules it makes:
read and checked (`recoup.jobs.trace_context`; a malformed one is a 400 naming the header), and
given the context of its creation span when the app traces (`recoup.jobs.tracing`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from recoup.api.state import ApiState
from recoup.jobs.model import NewJob
from recoup.jobs.schedules.model import NewSchedule
from recoup.jobs.trace_context import TraceContext, trace_context


async def request_trace(request: Request) -> TraceContext | None:
    headers = request.headers
    return trace_context(headers.get("traceparent"), headers.get("tracestate"))


Trace = Annotated[TraceContext | None, Depends(request_trace)]


def traced(job: NewJob, state: ApiState) -> NewJob:
    """The job as stored: with its creation span's context when the app traces."""
    return job if state.tracing is None else state.tracing.created(job)


def traced_schedule(schedule: NewSchedule, state: ApiState) -> NewSchedule:
    """The schedule as stored: with its creation span's context when the app traces."""
    return schedule if state.tracing is None else state.tracing.schedule_created(schedule)


__all__ = ["Trace", "request_trace", "traced", "traced_schedule"]
