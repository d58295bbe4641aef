"""Recovery analytics and the dry-run replay of failures through a retry policy."""

from recoup.analytics.replay import (
    BadRow,
    FailureRows,
    ReplayResult,
    read_failures,
    replay_failures,
    summarize,
    write_planned,
)

__all__ = [
    "BadRow",
    "FailureRows",
    "ReplayResult",
    "read_failures",
    "replay_failures",
    "summarize",
    "write_planned",
]
