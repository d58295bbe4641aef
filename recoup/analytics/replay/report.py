"""Reporting on a replay: hour-by-hour load (UTC and local), the nightly comparison, the plot."""

from __future__ import annotations

from typing import Any

import numpy as np

from recoup.analytics.replay._units import DAY, I64
from recoup.analytics.replay.bulk import AWAIT_CUSTOMER, NO_RETRY, RETRY, ReplayResult
from recoup.timekeeping.bulk import ZoneOffsets
from recoup.timekeeping.zones import zone


def _histograms(at: I64, offset: I64) -> dict[str, Any]:
    minutes = at // 60
    peak = int(np.bincount(minutes - minutes.min()).max()) if at.size else 0
    return {
        "attempts": int(at.size),
        "by_utc_hour": np.bincount((at // 3600) % 24, minlength=24).tolist(),
        "by_local_hour": np.bincount(((at + offset) // 3600) % 24, minlength=24).tolist(),
        "peak_per_minute": peak,
    }


def nightly_baseline(result: ReplayResult) -> tuple[I64, I64]:
    """The old nightly batch: every planned attempt runs at 00:00 UTC of its UTC date instead
    (same attempts, same days; only the time of day differs). UTC seconds and local offsets."""
    at = result.attempt_at // DAY * DAY
    offset = np.zeros_like(at)
    zone_of = result.rows.zone[result.attempt_row]
    for code in np.unique(zone_of).tolist():
        mine = zone_of == code
        offset[mine] = ZoneOffsets(zone(result.rows.zones[code]), 0, 0).at(at[mine])
    return at, offset


def summarize(result: ReplayResult, *, compare_nightly: bool = False) -> dict[str, Any]:
    """The `--json` summary: counts by decision, hour histograms (UTC and local), the
    busiest minute and `unknown_codes` (rows per decline code the taxonomy does not know);
    with `compare_nightly`, the same figures for the nightly batch."""
    counts = np.bincount(result.kind, minlength=3)
    summary: dict[str, Any] = {
        "invoices": len(result.rows),
        "retry": int(counts[RETRY]),
        "no_retry": int(counts[NO_RETRY]),
        "await_customer": int(counts[AWAIT_CUSTOMER]),
        **_histograms(result.attempt_at, result.attempt_offset),
        "unknown_codes": dict(result.unknown_codes),
    }
    if compare_nightly:
        summary["nightly"] = _histograms(*nightly_baseline(result))
    return summary


def plot_hours(summary: dict[str, Any], path: str) -> None:
    """Draw the hour histograms of a `summarize` summary (and of its nightly batch, when it has
    one) to the PNG `path`. Needs matplotlib (the `plot` extra): `ImportError` without it."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never open a window
    import matplotlib.pyplot as plt

    hours = list(range(24))
    series = [("planned", summary)]
    if "nightly" in summary:
        series.append(("nightly 00:00 UTC", summary["nightly"]))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    width = 0.8 / len(series)
    for i, (label, figures) in enumerate(series):
        offset = [h + (i - (len(series) - 1) / 2) * width for h in hours]
        axes[0].bar(offset, figures["by_utc_hour"], width=width, label=label)
        axes[1].bar(offset, figures["by_local_hour"], width=width, label=label)
    axes[0].set_title("attempts by UTC hour")
    axes[1].set_title("attempts by customer-local hour")
    for ax in axes:
        ax.set_xticks(hours[::2])
        ax.set_xlabel("hour")
        ax.legend()
    axes[0].set_ylabel("attempts")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


__all__ = ["nightly_baseline", "plot_hours", "summarize"]
