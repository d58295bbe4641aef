"""Per-tenant rate limits of the HTTP API: one token bucket per tenant, in this process.

A `RateLimit` of `N/s` (or `/min`, `/h`) refills a tenant's bucket at N per unit and holds at
most N (a burst of one unit's worth); each authenticated request takes one. An empty bucket
answers 429 with `Retry-After`, the whole seconds until a request would pass. Limits are per
process: behind several `recoup serve` processes a tenant gets the limit from each.

Off unless configured (`recoup serve --rate-limit 50/s`, or `RECOUP_RATE_LIMIT`): the API is
usually called by the operator's own services, and a default would be a guess that throttles
a legitimate burst of failures. Time is an injectable monotonic clock, so tests step it.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from recoup.errors import InvalidInput

_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}
_SPEC = re.compile(r"\s*(\d+(?:\.\d+)?)\s*/\s*([a-z]+)\s*")
SPEC_ALLOWED = "expected N/s, N/min or N/h (N > 0), or off"
PRUNE_AT = 10_000  # buckets kept before the full ones (equal to no bucket) are dropped


@dataclass(frozen=True)
class RateLimit:
    """`rate` requests per second on average, at most `burst` at once."""

    rate: float
    burst: float

    @classmethod
    def parse(cls, spec: str, *, field: str = "--rate-limit") -> RateLimit | None:
        """`"50/s"`, `"600/min"`, `"10000/h"`; `"off"` (or empty) is None, no limit."""
        text = spec.strip().lower()
        if text in ("", "off", "none", "0"):
            return None
        match = _SPEC.fullmatch(text)
        if match is None or match.group(2) not in _UNITS or float(match.group(1)) <= 0:
            raise InvalidInput(field, spec, SPEC_ALLOWED)
        count = float(match.group(1))
        return cls(rate=count / _UNITS[match.group(2)], burst=max(1.0, count))


class TenantRateLimiter:
    """`wait(tenant)`: 0.0 when a request of `tenant` may pass now (and counts it), else the
    seconds until one may. Thread-safe: the API's sync dependencies run in a thread pool."""

    def __init__(self, limit: RateLimit, *, monotonic: Callable[[], float] = time.monotonic):
        self.limit = limit
        self._monotonic = monotonic
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant → (tokens, at)
        self._lock = threading.Lock()

    def wait(self, tenant: str) -> float:
        rate, burst = self.limit.rate, self.limit.burst
        with self._lock:
            now = self._monotonic()
            tokens, at = self._buckets.get(tenant, (burst, now))
            tokens = min(burst, tokens + (now - at) * rate)
            if tokens >= 1.0:
                self._buckets[tenant] = (tokens - 1.0, now)
                if len(self._buckets) > PRUNE_AT:
                    self._prune(now)
                return 0.0
            self._buckets[tenant] = (tokens, now)
            return (1.0 - tokens) / rate

    def _prune(self, now: float) -> None:
        rate, burst = self.limit.rate, self.limit.burst
        for tenant, (tokens, at) in list(self._buckets.items()):
            if tokens + (now - at) * rate >= burst:
                del self._buckets[tenant]


def retry_after(wait: float) -> str:
    """`Retry-After` in whole seconds (RFC 9110 delta-seconds), never 0 for a refusal."""
    return str(max(1, math.ceil(wait)))


__all__ = ["SPEC_ALLOWED", "RateLimit", "TenantRateLimiter", "retry_after"]
