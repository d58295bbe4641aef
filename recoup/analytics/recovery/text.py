"""The report's figures as short text, shared by the terminal and HTML renderers."""

from __future__ import annotations

from recoup.analytics.recovery.buckets import Bucket
from recoup.analytics.recovery.experiment import ExperimentComparison
from recoup.analytics.recovery.report import RecoveryReport
from recoup.analytics.recovery.spikes import Share

INSUFFICIENT = "insufficient data"


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def rate_text(bucket: Bucket) -> str:
    """The rate, or "insufficient data" below the minimum volume: never a healthy-looking
    number from too few invoices."""
    return INSUFFICIENT if bucket.insufficient_data else percent(bucket.rate)


def interval_text(bucket: Bucket) -> str:
    if bucket.low is None or bucket.high is None:
        return "—"
    return f"{percent(bucket.low)} – {percent(bucket.high)}"


def share_text(s: Share) -> str:
    return f"{s.count}/{s.total} ({percent(s.share)}, {percent(s.low)} – {percent(s.high)})"


def sections(report: RecoveryReport, *, keep_empty: bool = False) -> list[tuple[str, list[Bucket]]]:
    """The breakdown tables, in reading order, each with its title; buckets where nothing
    happened (no invoice, no attempt: the 22 hours no attempt lands in) are left out unless
    `keep_empty`."""
    tables = [
        ("Success by attempt number (attempts that ran: succeeded / ran)", report.by_attempt),
        ("Recovered by a retry numbered ≤ n (share of finished invoices)",
         report.cumulative_by_attempt),
        ("Recovery by local hour of the attempt (soft declines only)", report.by_local_hour),
        ("Recovery by local weekday of the attempt (soft declines only)", report.by_weekday),
        ("Recovery by decline category of the opening failure", report.by_decline_category),
        ("Recovery by decline code of the opening failure", report.by_decline_code),
        ("Recovery by gateway", report.by_gateway),
        ("Recovery by merchant id", report.by_merchant),
        ("Recovery by cohort (local billing date)", report.by_cohort),
    ]  # fmt: skip
    if keep_empty:
        return tables
    return [(title, [b for b in buckets if b.count]) for title, buckets in tables]


def experiment_verdict(e: ExperimentComparison, level: str) -> str:
    """One sentence: the difference, its p-value, and what is still needed."""
    if e.difference is None:
        verdict = "no comparison yet: an arm has no finished invoice"
    elif e.significant:
        verdict = f"b − a = {e.difference:+.1%}, p = {e.p_value:.3g}: significant at {level}"
    else:
        more = (
            "cannot say how many more (no difference yet)"
            if e.more_needed_a is None
            else f"needs {e.more_needed_a} more finished in a, {e.more_needed_b} in b "
            f"({e.needed_per_arm} per arm for {e.power:.0%} power)"
        )
        p = "n/a" if e.p_value is None else f"{e.p_value:.3g}"
        verdict = f"b − a = {e.difference:+.1%}, p = {p}: not significant at {level}; {more}"
    return verdict


__all__ = [
    "INSUFFICIENT",
    "experiment_verdict",
    "interval_text",
    "percent",
    "rate_text",
    "sections",
    "share_text",
]
