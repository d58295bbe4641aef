"""Recovery analytics: what the dunning runtime's own records say about recovery.

Pure: invoices in (`recoup.dunning.invoice.Invoice`, with their attempts), figures out; no
clock (`ReportOptions.now` stands for it), environment, network or database. The renderers
(`render_terminal`, `render_html`, `chart_svgs`) only format a built report; matplotlib and
jinja2 (the `plot` extra) are imported inside the HTML and chart functions.

Definitions (what every figure counts):

- **Finished** invoices are recovered or exhausted; **running** ones (retrying, awaiting the
  customer) are in no denominator until they end, and are counted apart (`running`);
  **stopped** ones (cancelled: dunning stopped without a payment, by a cancelled
  subscription, a voided invoice or an operator) are in none either (`stopped`).
- **Overall** and the invoice-level breakdowns (decline code and category of the failure that
  opened dunning, gateway, merchant id, cohort = the customer-local date of `failed_at`): of the
  finished invoices in the bucket, how many were recovered, by any means (a retry or paid out
  of band; `recovered_by` splits the two).
- **Hard declines** are split out as their own figure (`hard_declines`): never retried, so they
  would only drag the timing figures down.
- **By attempt n**: the attempts numbered n that *ran* (outcome succeeded or failed; scheduled,
  cancelled, errored and unanswered ones did not charge) on finished invoices; recovered =
  those that succeeded. The rate is P(attempt n succeeds | it ran), not a share of invoices.
  `cumulative_by_attempt` gives that share: finished invoices recovered by a retry numbered ≤ n,
  over all finished invoices.
- **By local hour / weekday** (timing comparisons): the same attempts, in the customer's zone,
  of invoices opened by a *soft* decline only; attempts of hard- or customer-declined invoices
  are left out (`timing_excluded_attempts`), as their timing is not the schedule's.
- Every bucket has its count, recovered, rate and Wilson score interval at
  `options.confidence`; one with a count below `options.min_volume` is marked
  `insufficient_data` and must be shown as unknown, never as healthy.
- **Spikes** (`spikes`): a decline code's share of a gateway's or merchant id's charge outcomes
  against that bucket's own baseline; **merchant windows, low-volume merchants, tags and the
  review queue** (`merchants`): see those modules' docstrings.
- **Load shape** (`load`): attempts sent per UTC minute and hour, with the peaks;
  **double charges** are passed in (`double_charges`, target 0).
- **Experiment** (`experiment`): two policies compared (`experiment` module docstring).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recoup.lazy import lazy_getattr

# The exports load their modules on first use (`recoup.lazy`); `_HOMES` is the one list, which
# the TYPE_CHECKING imports and `__all__` repeat (tests/test_packaging.py holds them to it).
if TYPE_CHECKING:
    from recoup.analytics.recovery.buckets import Bucket
    from recoup.analytics.recovery.charts import CHARTS, chart_svgs
    from recoup.analytics.recovery.experiment import Arm, ExperimentComparison
    from recoup.analytics.recovery.html_report import render_html
    from recoup.analytics.recovery.json_report import report_json
    from recoup.analytics.recovery.load import LoadShape
    from recoup.analytics.recovery.log import AttemptLogEntry, attempt_log
    from recoup.analytics.recovery.merchants import (
        TAG_KINDS,
        MerchantJudgement,
        MerchantTag,
        ReviewItem,
    )
    from recoup.analytics.recovery.report import RecoveryReport, ReportOptions, build_report
    from recoup.analytics.recovery.spikes import Share, Spike
    from recoup.analytics.recovery.stats import Interval, wilson
    from recoup.analytics.recovery.terminal_report import render_terminal

_HOMES = {
    "Arm": "recoup.analytics.recovery.experiment",
    "AttemptLogEntry": "recoup.analytics.recovery.log",
    "Bucket": "recoup.analytics.recovery.buckets",
    "CHARTS": "recoup.analytics.recovery.charts",
    "ExperimentComparison": "recoup.analytics.recovery.experiment",
    "Interval": "recoup.analytics.recovery.stats",
    "LoadShape": "recoup.analytics.recovery.load",
    "MerchantJudgement": "recoup.analytics.recovery.merchants",
    "MerchantTag": "recoup.analytics.recovery.merchants",
    "RecoveryReport": "recoup.analytics.recovery.report",
    "ReportOptions": "recoup.analytics.recovery.report",
    "ReviewItem": "recoup.analytics.recovery.merchants",
    "Share": "recoup.analytics.recovery.spikes",
    "Spike": "recoup.analytics.recovery.spikes",
    "TAG_KINDS": "recoup.analytics.recovery.merchants",
    "attempt_log": "recoup.analytics.recovery.log",
    "build_report": "recoup.analytics.recovery.report",
    "chart_svgs": "recoup.analytics.recovery.charts",
    "render_html": "recoup.analytics.recovery.html_report",
    "render_terminal": "recoup.analytics.recovery.terminal_report",
    "report_json": "recoup.analytics.recovery.json_report",
    "wilson": "recoup.analytics.recovery.stats",
}
__getattr__ = lazy_getattr(__name__, _HOMES)

__all__ = [
    "CHARTS",
    "TAG_KINDS",
    "Arm",
    "AttemptLogEntry",
    "Bucket",
    "ExperimentComparison",
    "Interval",
    "LoadShape",
    "MerchantJudgement",
    "MerchantTag",
    "RecoveryReport",
    "ReportOptions",
    "ReviewItem",
    "Share",
    "Spike",
    "attempt_log",
    "build_report",
    "chart_svgs",
    "render_html",
    "render_terminal",
    "report_json",
    "wilson",
]
