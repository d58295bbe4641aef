"""Decline-code spikes on one gateway or merchant id, judged against that bucket's own past.

The evidence is the bucket's **charge outcomes**: the failure that opened each invoice (at its
`failed_at`, with its decline code) and every retry attempt that ran (succeeded, or failed with
its decline code), of every invoice, running ones included: an outcome is final once reported,
and a sick gateway shows first on the invoices still in dunning. For each decline code the
share of the bucket's outcomes that carry it is compared between

- the **current window**, the `window` before `end`, and
- the **baseline**, the `baseline_windows` windows of the same length just before it,

separately per stratum (`among`): the opening failures, then each retry number apart. They mix
differently (retries are soft declines by construction, and each later attempt holds only the
survivors of the one before), and a month of dunning moves from mostly failures to mostly late
retries, so a pooled share would "spike" on every bucket as campaigns age.

A code spikes when its current share is significantly above the baseline share: the lower
Wilson bound of the current share is above the upper Wilson bound of the baseline share (both at
the report's confidence; non-overlapping intervals is a conservative test, which keeps the false
alarms of testing many codes on many buckets down), and the code was seen at least `min_count`
times in the current window. Shares, not counts: when failures rise evenly everywhere (a busy
week) no share moves and nothing is flagged; a gateway whose normal share of a code is high is
compared with itself, not with the others. An empty baseline has the interval [0, 1], so a
bucket with no past is never flagged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from recoup.analytics.recovery.stats import wilson
from recoup.dunning.invoice import AttemptState, Invoice

NO_CODE = "(none)"  # a decline that came without a code


@dataclass(frozen=True, kw_only=True)
class ChargeEvent:
    """One charge outcome: `decline_code` is None for a success."""

    at: datetime
    declined: bool
    decline_code: str | None
    attempt: int = 0  # the retry's number; 0: the failure that opened the invoice


def charge_events(invoice: Invoice) -> list[ChargeEvent]:
    """The invoice's opening failure and the outcome of each retry that ran."""
    events = [
        ChargeEvent(at=invoice.failed_at, declined=True, decline_code=_code(invoice.decline_code))
    ]
    for a in invoice.attempts:
        if a.state is AttemptState.SUCCEEDED:
            events.append(
                ChargeEvent(at=a.at, declined=False, decline_code=None, attempt=a.attempt)
            )
        elif a.state is AttemptState.FAILED:
            code = _code(a.decline_code)
            events.append(ChargeEvent(at=a.at, declined=True, decline_code=code, attempt=a.attempt))
    return events


def _code(code: str | None) -> str:
    return code.strip().lower() if code and code.strip() else NO_CODE


@dataclass(frozen=True, kw_only=True)
class Share:
    """`count` of `total` outcomes carried the code: the share and its Wilson interval."""

    count: int
    total: int
    share: float | None
    low: float
    high: float


def share(count: int, total: int, confidence: float) -> Share:
    interval = wilson(count, total, confidence)
    return Share(
        count=count,
        total=total,
        share=count / total if total else None,
        low=interval.low,
        high=interval.high,
    )


@dataclass(frozen=True, kw_only=True)
class Spike:
    dimension: str  # gateway | merchant_id
    key: str
    decline_code: str
    among: str  # "failures" (the opening ones) | "attempt N" (the Nth retry)
    window_days: int
    window_start: datetime
    window_end: datetime
    current: Share
    baseline: Share


@dataclass(frozen=True, kw_only=True)
class WindowCounts:
    """Outcomes, and outcomes per decline code, in one window."""

    total: int
    by_code: Counter[str]


def stratum(attempt: int) -> str:
    """The name of an outcome's stratum (module docstring)."""
    return "failures" if attempt == 0 else f"attempt {attempt}"


def window_counts(
    events: Iterable[ChargeEvent], start: datetime, end: datetime, among: str | None = None
) -> WindowCounts:
    """`among`: only the outcomes of that stratum (`stratum`); None: all of them."""
    total = 0
    by_code: Counter[str] = Counter()
    for e in events:
        if among is not None and stratum(e.attempt) != among:
            continue
        if start <= e.at < end:
            total += 1
            if e.decline_code is not None:
                by_code[e.decline_code] += 1
    return WindowCounts(total=total, by_code=by_code)


def find_spikes(
    events: list[ChargeEvent],
    *,
    dimension: str,
    key: str,
    end: datetime,
    window_days: int,
    baseline_windows: int,
    confidence: float,
    min_count: int,
) -> list[Spike]:
    """The bucket's spiking decline codes (module docstring), most significant first."""
    window = timedelta(days=window_days)
    start = end - window
    spikes: list[Spike] = []
    for among in sorted({stratum(e.attempt) for e in events}):
        current = window_counts(events, start, end, among)
        baseline = window_counts(events, start - baseline_windows * window, start, among)
        for code, count in current.by_code.items():
            if count < min_count:
                continue
            now_share = share(count, current.total, confidence)
            then_share = share(baseline.by_code.get(code, 0), baseline.total, confidence)
            if now_share.low > then_share.high:
                spikes.append(
                    Spike(
                        dimension=dimension,
                        key=key,
                        decline_code=code,
                        among=among,
                        window_days=window_days,
                        window_start=start,
                        window_end=end,
                        current=now_share,
                        baseline=then_share,
                    )
                )
    spikes.sort(key=lambda s: (s.baseline.high - s.current.low, s.decline_code))
    return spikes


__all__ = [
    "NO_CODE",
    "ChargeEvent",
    "Share",
    "Spike",
    "WindowCounts",
    "charge_events",
    "find_spikes",
    "share",
    "stratum",
    "window_counts",
]
