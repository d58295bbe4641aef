"""The dry-run replay: plan a month of failures with a policy, in bulk, and see where retries land.

Nothing is written to any job store. One module per step, in the order a replay runs:

- `failures_csv`: the failures CSV → coded columns (`FailureRows`) and line-numbered `BadRow`s;
- `bulk`: every row planned at once (`replay_failures` → `ReplayResult`), exactly as
  `plan_retries` plans it one failure at a time;
- `report`: the summary (hour-by-hour load, UTC and local), the nightly-batch comparison, the plot;
- `planned_csv`: the planned attempts as the `--out` CSV.

The names below are the replay's public surface; import them from here.
"""

from recoup.analytics.replay.bulk import (
    AWAIT_CUSTOMER,
    KIND_NAMES,
    NO_RETRY,
    RETRY,
    ReplayResult,
    attempts_of,
    replay_failures,
)
from recoup.analytics.replay.failures_csv import BadRow, FailureRows, read_failures, split_advice
from recoup.analytics.replay.planned_csv import planned_lines, write_planned
from recoup.analytics.replay.report import nightly_baseline, plot_hours, summarize

__all__ = [
    "AWAIT_CUSTOMER",
    "KIND_NAMES",
    "NO_RETRY",
    "RETRY",
    "BadRow",
    "FailureRows",
    "ReplayResult",
    "attempts_of",
    "nightly_baseline",
    "planned_lines",
    "plot_hours",
    "read_failures",
    "replay_failures",
    "split_advice",
    "summarize",
    "write_planned",
]
