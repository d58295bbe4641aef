"""`--otel` of `recoup serve` and `recoup worker`: OpenTelemetry spans of jobs exported over
OTLP/HTTP (`recoup.jobs.tracing`), configured by the SDK's `OTEL_*` environment variables."""

from __future__ import annotations

from typing import Annotated

import typer

from recoup.cli._app import fail
from recoup.jobs.tracing import Tracing

OtelOption = Annotated[
    bool,
    typer.Option(
        "--otel",
        envvar="RECOUP_OTEL",
        help="Emit OpenTelemetry spans of job creation and attempts over OTLP/HTTP "
        "(OTEL_EXPORTER_OTLP_ENDPOINT; needs the [otel] extra).",
    ),
]


def otel_tracing(enabled: bool) -> Tracing | None:
    """The process's tracing, or None when off; one line and exit 2 without the extra."""
    if not enabled:
        return None
    from recoup.jobs.tracing import otlp_tracing

    try:
        return otlp_tracing()
    except ModuleNotFoundError as exc:
        fail(f"--otel needs the otel extra (pip install 'recoup[otel]'): {exc}")


__all__ = ["OtelOption", "otel_tracing"]
