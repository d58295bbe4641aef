"""`render_terminal`: the report as rich tables (what `recoup report` prints)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from recoup.analytics.recovery.buckets import Bucket
from recoup.analytics.recovery.experiment import ExperimentComparison
from recoup.analytics.recovery.report import RecoveryReport
from recoup.analytics.recovery.spikes import Spike
from recoup.analytics.recovery.text import (
    experiment_verdict,
    interval_text,
    rate_text,
    sections,
    share_text,
)


def render_terminal(report: RecoveryReport, console: Console) -> None:
    """Print the report's figures and tables on `console`."""
    o = report.options
    level = f"{o.confidence:.0%}"
    console.print(_summary(report))
    for title, buckets in sections(report):
        if buckets:
            console.print(_buckets(title, buckets, level))
    console.print(_spikes(report.spikes))
    console.print(_review(report))
    if report.experiment is not None:
        console.print(_experiment(report.experiment, level))


def _summary(report: RecoveryReport) -> Table:
    o = report.options
    table = Table(title="Recovery report", show_header=False, title_justify="left")
    table.add_column("figure")
    table.add_column("value")
    overall = report.overall
    running = ", ".join(f"{n} {state}" for state, n in report.running_by_state.items())
    table.add_row("invoices", str(report.invoices))
    table.add_row("finished (the denominator)", str(report.finished))
    table.add_row(
        "still running (left out)", f"{report.running}" + (f" ({running})" if running else "")
    )
    table.add_row("dunning stopped, unpaid (left out)", str(report.stopped))
    table.add_row(
        "recovery rate",
        f"{rate_text(overall)}  [{interval_text(overall)}]  {overall.recovered}/{overall.count}",
    )
    table.add_row(
        "recovered by",
        f"retry {report.recovered_by['attempt']}, "
        f"paid out of band {report.recovered_by['paid_out_of_band']}",
    )
    hard = report.hard_declines
    table.add_row("hard declines (never retried)", f"{hard.count} finished, {hard.recovered} paid")
    table.add_row("attempts left out of timing (not soft)", str(report.timing_excluded_attempts))
    load = report.load
    table.add_row("attempts sent", str(load.attempts))
    table.add_row("peak per minute", f"{load.peak_per_minute} ({load.peak_minute or '—'})")
    table.add_row("peak per hour", f"{load.peak_per_hour} ({load.peak_hour or '—'})")
    style = "bold red" if report.double_charges else "green"
    table.add_row("double charges (target 0)", f"[{style}]{report.double_charges}[/{style}]")
    table.add_row(
        "settings",
        f"now {o.now.isoformat()}, min volume {o.min_volume}, windows {o.window_days} d / "
        f"{o.low_volume_window_days} d (low volume), confidence {o.confidence:.0%}",
    )
    return table


def _buckets(title: str, buckets: Sequence[Bucket], level: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("bucket")
    table.add_column("count", justify="right")
    table.add_column("recovered", justify="right")
    table.add_column("rate", justify="right")
    table.add_column(f"{level} interval", justify="right")
    for b in buckets:
        key = f"{b.key} ({b.category})" if b.category and b.category != b.key else b.key
        style = "dim" if b.insufficient_data else None
        table.add_row(
            key, str(b.count), str(b.recovered), rate_text(b), interval_text(b), style=style
        )
    return table


def _spikes(spikes: Sequence[Spike]) -> Table:
    table = Table(
        title="Decline-code spikes (against the bucket's own baseline)", title_justify="left"
    )
    for column in ("bucket", "decline code", "among", "window", "now", "baseline"):
        table.add_column(column)
    for s in spikes:
        table.add_row(
            f"{s.dimension} {s.key}",
            s.decline_code,
            s.among,
            f"{s.window_days} d to {s.window_end:%Y-%m-%d %H:%M}",
            share_text(s.current),
            share_text(s.baseline),
        )
    if not spikes:
        table.add_row("none", "", "", "", "", "")
    return table


def _review(report: RecoveryReport) -> Table:
    table = Table(title="Review queue (low-volume merchant ids)", title_justify="left")
    for column in ("merchant id", "window", "reason", "tag"):
        table.add_column(column)
    for item in report.review_queue:
        tag = f"{item.tag.tag}: {item.tag.note}" if item.tag else ""
        table.add_row(item.merchant_id, f"{item.window_days} d", item.reason, tag)
    for item in report.suppressed:
        tag = f"{item.tag.tag}: {item.tag.note}" if item.tag else ""
        table.add_row(item.merchant_id, f"{item.window_days} d", item.reason, tag, style="dim")
    if not (report.review_queue or report.suppressed):
        table.add_row("none", "", "", "")
    return table


def _experiment(e: ExperimentComparison, level: str) -> Table:
    table = Table(title="Experiment", title_justify="left")
    for column in (
        "arm",
        "policy",
        "finished",
        "recovered",
        "rate",
        f"{level} interval",
        "running",
    ):
        table.add_column(column)
    for name, arm in (("a", e.a), ("b", e.b)):
        b = arm.recovery
        table.add_row(
            name, arm.policy, str(b.count), str(b.recovered), rate_text(b), interval_text(b),
            str(arm.running),
        )  # fmt: skip
    table.caption = experiment_verdict(e, level)
    return table


__all__ = ["render_terminal"]
