"""`chart_svgs`: the report's charts as inline SVG, drawn by matplotlib (the `plot` extra).

matplotlib is imported inside the functions (the core imports this package without it), and
only its object API is used with the SVG canvas: no pyplot, no display, no global figure
state. rcParams are global, so the few set for SVG output are set under a lock.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from recoup.analytics.recovery.buckets import Bucket
from recoup.analytics.recovery.report import RecoveryReport

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

CHARTS = (
    "rate_by_local_hour",
    "rate_by_weekday",
    "rate_by_attempt",
    "load_per_minute",
    "load_per_hour",
    "experiment",
)
_LOCK = threading.Lock()
_OK, _THIN = "#2b6cb0", "#a0aec0"  # a bucket with enough data; one with insufficient data


def chart_svgs(report: RecoveryReport) -> dict[str, str]:
    """Chart name → one `<svg>` element (no XML prolog), for every chart the report has data
    for: the experiment chart only when there is an experiment."""
    import matplotlib

    drawn: dict[str, str] = {}
    # Text stays text (a small file a browser renders with its own fonts); fixed element ids,
    # so the same report gives the same page.
    with _LOCK, matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "recoup-report"}):
        drawn["rate_by_local_hour"] = _svg(
            _rates(report.by_local_hour, "recovery by local hour (soft declines)", "local hour")
        )
        drawn["rate_by_weekday"] = _svg(
            _rates(report.by_weekday, "recovery by local weekday (soft declines)", "weekday")
        )
        drawn["rate_by_attempt"] = _svg(
            _rates(report.by_attempt, "success by attempt number (attempts that ran)", "attempt")
        )
        drawn["load_per_minute"] = _svg(
            _load(
                report.load.per_minute,
                "payment API: the busiest minute of each hour",
                "%Y-%m-%dT%H:%MZ",
                busiest=True,
            )
        )
        drawn["load_per_hour"] = _svg(
            _load(
                report.load.per_hour,
                "payment API: attempts per hour",
                "%Y-%m-%dT%H:00Z",
                busiest=False,
            )
        )
        if report.experiment is not None:
            e = report.experiment
            drawn["experiment"] = _svg(
                _rates(
                    [e.a.recovery, e.b.recovery],
                    f"experiment: recovery per arm (p = {_p(e.p_value)})",
                    "policy",
                )
            )
    return drawn


def _figure(title: str) -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 3.2), layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title, fontsize=11)
    axes.spines[["top", "right"]].set_visible(False)
    return figure, axes


def _rates(buckets: Sequence[Bucket], title: str, xlabel: str) -> Figure:
    """Rates as bars with their Wilson intervals as error bars; buckets with insufficient
    data are grey and labelled so, never shown like the others."""
    figure, axes = _figure(title)
    xs = list(range(len(buckets)))
    rates = [b.rate or 0.0 for b in buckets]
    below = [b.rate - b.low if b.rate is not None and b.low is not None else 0.0 for b in buckets]
    above = [b.high - b.rate if b.rate is not None and b.high is not None else 0.0 for b in buckets]
    colours = [_THIN if b.insufficient_data else _OK for b in buckets]
    axes.bar(xs, rates, color=colours)
    axes.errorbar(xs, rates, yerr=[below, above], fmt="none", ecolor="#1a202c", capsize=2, lw=0.8)
    axes.set_xticks(xs, [b.key for b in buckets], fontsize=8)
    axes.set_ylim(0, 1)
    axes.set_ylabel("rate")
    axes.set_xlabel(xlabel)
    if any(b.insufficient_data for b in buckets):
        axes.text(
            0.99, 0.97, "grey: insufficient data", transform=axes.transAxes,
            ha="right", va="top", fontsize=8, color="#4a5568",
        )  # fmt: skip
    return figure


def _load(counts: dict[str, int], title: str, key_format: str, *, busiest: bool) -> Figure:
    """Attempts per UTC hour, or (`busiest`) the busiest minute of each hour: one step line
    over every hour from the first to the last, so a month is ~720 points in one path, not
    one mark per minute."""
    from matplotlib.ticker import MaxNLocator

    figure, axes = _figure(title)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    hours = _hourly(counts, key_format, busiest=busiest)
    if hours:
        times, values = zip(*hours, strict=True)
        axes.step(times, values, where="post", color=_OK, lw=1)
        axes.set_ylim(0, max(values) * 1.1)
        figure.autofmt_xdate()
    else:
        axes.text(0.5, 0.5, "no attempts", transform=axes.transAxes, ha="center")
    axes.set_ylabel("attempts per minute (peak)" if busiest else "attempts per hour")
    axes.set_xlabel("UTC")
    return figure


def _hourly(
    counts: dict[str, int], key_format: str, *, busiest: bool
) -> list[tuple[datetime, int]]:
    """(hour, value) for every hour from the first count's to one past the last's (zeros
    included): the sum of the hour's counts, or their maximum when `busiest`."""
    per_hour: dict[datetime, int] = {}
    for key, n in counts.items():
        hour = datetime.strptime(key, key_format).replace(minute=0)
        per_hour[hour] = max(per_hour.get(hour, 0), n) if busiest else per_hour.get(hour, 0) + n
    if not per_hour:
        return []
    first, last = min(per_hour), max(per_hour) + timedelta(hours=1)
    steps = int((last - first) / timedelta(hours=1))
    hours = [first + timedelta(hours=h) for h in range(steps + 1)]
    return [(h, per_hour.get(h, 0)) for h in hours]


def _svg(figure: Figure) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata={"Date": None})
    text = out.getvalue()
    return text[text.index("<svg") :]


def _p(p_value: float | None) -> str:
    return "n/a" if p_value is None else f"{p_value:.3g}"


__all__ = ["CHARTS", "chart_svgs"]
