"""A bucket of the report (a count, how many recovered, the rate and its Wilson interval) and
the tally that builds buckets by key."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from recoup.analytics.recovery.stats import wilson

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, kw_only=True)
class Bucket:
    """`recovered` of `count` (the denominator: finished invoices or attempts that ran, as
    the breakdown says), the rate, its Wilson interval at the report's confidence, and
    `insufficient_data` when `count` is below the minimum volume: such a rate is shown as
    unknown, never as healthy. `rate`, `low` and `high` are None when `count` is 0."""

    key: str
    count: int
    recovered: int
    rate: float | None
    low: float | None
    high: float | None
    insufficient_data: bool
    category: str | None = None  # soft | hard | customer, on decline-code buckets


def make_bucket(
    key: str,
    recovered: int,
    count: int,
    *,
    min_volume: int,
    confidence: float,
    category: str | None = None,
) -> Bucket:
    if count == 0:
        rate = low = high = None
    else:
        interval = wilson(recovered, count, confidence)
        rate, low, high = recovered / count, interval.low, interval.high
    return Bucket(
        key=key,
        count=count,
        recovered=recovered,
        rate=rate,
        low=low,
        high=high,
        insufficient_data=count < min_volume,
        category=category,
    )


class Tally(Generic[K]):
    """Counts and successes by key, turned into buckets in key order."""

    def __init__(self) -> None:
        self.count: dict[K, int] = {}
        self.recovered: dict[K, int] = {}

    def add(self, key: K, success: bool) -> None:
        self.count[key] = self.count.get(key, 0) + 1
        self.recovered[key] = self.recovered.get(key, 0) + int(success)

    def buckets(
        self,
        *,
        min_volume: int,
        confidence: float,
        keys: list[K] | None = None,
        name: Callable[[K], str] = str,
        category: Callable[[K], str | None] = lambda _key: None,
    ) -> list[Bucket]:
        """One bucket per key (the given `keys`, empty ones included, else the keys seen, in
        sorted order)."""
        ordered = keys if keys is not None else sorted(self.count, key=_sort_key)
        return [
            make_bucket(
                name(k),
                self.recovered.get(k, 0),
                self.count.get(k, 0),
                min_volume=min_volume,
                confidence=confidence,
                category=category(k),
            )
            for k in ordered
        ]


def _sort_key(key: object) -> tuple[int, str]:
    # Mixed keys (None beside strings): None last; numbers in numeric order, the rest by text.
    if key is None:
        return (2, "")
    if isinstance(key, int):
        return (0, f"{key:020d}")
    return (1, str(key))


__all__ = ["Bucket", "Tally", "make_bucket"]
