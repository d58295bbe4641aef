"""The renderers: stable JSON, terminal tables, one self-contained HTML page with its charts."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

from rich.console import Console

from recoup.analytics.recovery import (
    MerchantTag,
    RecoveryReport,
    ReportOptions,
    build_report,
    chart_svgs,
    render_html,
    render_terminal,
    report_json,
)
from recoup.analytics.recovery.charts import CHARTS
from tests.analytics.recovery.build import NOW, invoice
from tests.test_packaging import run_without_extras

HOSTILE = '<script>alert("m")</script>'


def sample(*, experiment: bool = True) -> RecoveryReport:
    invoices = []
    for i in range(60):
        won = i % 3 == 0
        invoices.append(
            invoice(
                f"i{i}",
                [
                    (24 + i, "failed", "insufficient_funds"),
                    (72 + i, "succeeded" if won else "failed", None),
                ],
                failed_at=NOW - timedelta(days=30) + timedelta(hours=7 * i),
                timezone="America/New_York" if i % 2 else "Europe/Paris",
                policy=("p-" + "ab"[i % 2]) if experiment else "p-a",
                merchant_id=HOSTILE if i == 5 else "m-1",
            )
        )
    invoices.append(invoice("run", [(1, "scheduled", None)], state="retrying", policy="p-a"))
    invoices.append(invoice("hard", decline_code="stolen_card", policy="p-a"))
    tag = MerchantTag(
        merchant_id="m-1", tag="seasonal", note="x", tagged_at=NOW - timedelta(days=2)
    )
    return build_report(invoices, options=ReportOptions(now=NOW, min_volume=20), tags=[tag])


def test_report_json_round_trips_through_json_with_stable_keys() -> None:
    body = report_json(sample())
    assert json.loads(json.dumps(body)) == body
    assert list(body) == [
        "schema",
        "options",
        "invoices",
        "finished",
        "running",
        "running_by_state",
        "stopped",
        "overall",
        "recovered_by",
        "hard_declines",
        "by_decline_category",
        "by_attempt",
        "cumulative_by_attempt",
        "by_local_hour",
        "by_weekday",
        "timing_excluded_attempts",
        "by_decline_code",
        "by_gateway",
        "by_merchant",
        "by_cohort",
        "merchants",
        "spikes",
        "review_queue",
        "suppressed",
        "load",
        "double_charges",
        "experiment",
    ]
    assert body["schema"] == "recoup.recovery-report/1"
    assert list(body["overall"]) == [
        "key",
        "count",
        "recovered",
        "rate",
        "low",
        "high",
        "insufficient_data",
        "category",
    ]
    assert body["options"]["now"] == NOW.isoformat()
    assert body["experiment"]["a"]["policy"] == "p-a"
    assert body["load"]["peak_per_minute"] >= 1


def test_the_terminal_report_shows_the_figures_and_never_a_thin_rate_as_healthy() -> None:
    console = Console(record=True, width=160)
    render_terminal(sample(), console)
    text = console.export_text()
    for words in (
        "Recovery report",
        "still running (left out)",
        "double charges (target 0)",
        "Success by attempt number",
        "soft declines only",
        "insufficient data",
        "Review queue",
        "Experiment",
        "not significant at 95%",
        "peak per minute",
    ):
        assert words in text, words
    # The hard decline is one invoice: its category row says insufficient data, not 0.0%.
    hard_row = next(line for line in text.splitlines() if re.match(r"│ hard +│", line))
    cells = [cell.strip() for cell in hard_row.split("│")]
    assert cells[2:5] == ["1", "0", "insufficient data"]  # count, recovered, rate


def test_chart_svgs_gives_one_inline_svg_per_chart() -> None:
    charts = chart_svgs(sample())
    assert list(charts) == list(CHARTS)
    for svg in charts.values():
        assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
        assert "<?xml" not in svg
    assert "experiment" not in chart_svgs(sample(experiment=False))


def test_the_html_report_is_one_self_contained_page_with_an_svg_per_chart() -> None:
    report = sample()
    page = render_html(report)
    assert page.startswith("<!doctype html>")
    charts = chart_svgs(report)
    assert page.count("<svg") == len(charts) == len(CHARTS)
    for name in charts:
        assert f'id="chart-{name}"><svg' in page
    assert "<script" not in page.lower()  # the hostile merchant id is escaped
    assert "&lt;script&gt;" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched
    assert 'id="double-charges">0<' in page


def test_the_report_builds_and_prints_without_any_extra_and_html_says_which_is_missing(
    tmp_path: Path,
) -> None:
    done = run_without_extras(
        """
        import json
        from datetime import UTC, datetime
        from rich.console import Console
        from recoup.analytics.recovery import ReportOptions, build_report, report_json
        from recoup.analytics.recovery import render_html, render_terminal
        report = build_report([], options=ReportOptions(now=datetime(2026, 7, 1, tzinfo=UTC)))
        json.dumps(report_json(report))
        render_terminal(report, Console(file=open("/dev/null", "w")))
        try:
            render_html(report)
        except ImportError as exc:
            print("missing", exc.name)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("missing matplotlib", "missing jinja2")
