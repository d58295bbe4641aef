"""The load Recoup puts on the payment API: attempts per UTC minute and hour, and the peaks.

An attempt counts when it was sent: its state is succeeded, failed, errored, pending or
awaiting_report (scheduled and cancelled ones never reached the API). It counts in the minute
of its `at`, the instant its job fired; running invoices count too (load is load).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC

from recoup.dunning.invoice import AttemptState, Invoice

SENT = frozenset(
    {
        AttemptState.SUCCEEDED,
        AttemptState.FAILED,
        AttemptState.ERRORED,
        AttemptState.PENDING,
        AttemptState.AWAITING_REPORT,
    }
)


@dataclass(frozen=True, kw_only=True)
class LoadShape:
    attempts: int
    per_minute: dict[str, int]  # "2026-06-01T10:03Z" → attempts, minutes with none left out
    per_hour: dict[str, int]  # "2026-06-01T10:00Z" → attempts
    by_utc_hour_of_day: tuple[int, ...]  # 24 counts: where the day's load falls
    peak_per_minute: int
    peak_minute: str | None
    peak_per_hour: int
    peak_hour: str | None


def load_shape(invoices: Iterable[Invoice]) -> LoadShape:
    minutes: Counter[str] = Counter()
    hours: Counter[str] = Counter()
    hour_of_day = [0] * 24
    for invoice in invoices:
        for a in invoice.attempts:
            if a.state not in SENT:
                continue
            at = a.at.astimezone(UTC)
            minutes[at.strftime("%Y-%m-%dT%H:%MZ")] += 1
            hours[at.strftime("%Y-%m-%dT%H:00Z")] += 1
            hour_of_day[at.hour] += 1
    peak_minute = _peak(minutes)
    peak_hour = _peak(hours)
    return LoadShape(
        attempts=sum(minutes.values()),
        per_minute=dict(sorted(minutes.items())),
        per_hour=dict(sorted(hours.items())),
        by_utc_hour_of_day=tuple(hour_of_day),
        peak_per_minute=minutes[peak_minute] if peak_minute else 0,
        peak_minute=peak_minute,
        peak_per_hour=hours[peak_hour] if peak_hour else 0,
        peak_hour=peak_hour,
    )


def _peak(counts: Counter[str]) -> str | None:
    """The busiest key, the earliest of equals."""
    if not counts:
        return None
    return min(counts, key=lambda k: (-counts[k], k))


__all__ = ["SENT", "LoadShape", "load_shape"]
