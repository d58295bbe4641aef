"""`render_html`: the report as one self-contained HTML file (inline CSS and SVG charts, no
script, nothing fetched). Needs the `plot` extra (matplotlib for the charts, jinja2 for the
page), imported when called. Every value is escaped by the template (autoescape): merchant ids
and policy names are the tenant's text."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recoup.analytics.recovery.charts import chart_svgs
from recoup.analytics.recovery.report import RecoveryReport
from recoup.analytics.recovery.text import (
    experiment_verdict,
    interval_text,
    percent,
    rate_text,
    sections,
    share_text,
)

if TYPE_CHECKING:
    import jinja2


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("recoup.analytics.recovery", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


@dataclass(frozen=True)
class ExtraTable:
    """A table the caller adds after the report (the demo: the nightly batch beside Recoup)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


def render_html(
    report: RecoveryReport,
    *,
    extras: Sequence[ExtraTable] = (),
    next_steps: Sequence[str] = (),
) -> str:
    """The whole page: summary, charts (`chart_svgs`), every breakdown, spikes, the review
    queue and the experiment; then the caller's `extras` and a "What next" list."""
    level = f"{report.options.confidence:.0%}"
    return (
        _environment()
        .get_template("report.html")
        .render(
            r=report,
            level=level,
            charts=chart_svgs(report),
            sections=sections(report),
            verdict=experiment_verdict(report.experiment, level) if report.experiment else "",
            rate_text=rate_text,
            interval_text=interval_text,
            share_text=share_text,
            percent=percent,
            extras=extras,
            next_steps=next_steps,
        )
    )


__all__ = ["ExtraTable", "render_html"]
