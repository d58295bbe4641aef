"""Failed dashboard logins, throttled: at most `PER_ADDRESS` failures from one client address,
and `PER_TENANT` for every tenant together, in any `WINDOW_SECONDS`; beyond them the login form
answers 429 with Retry-After, before the pasted token is even looked up (so a guess made while
throttled learns nothing).

Why "every tenant together": a failed login names no tenant (the API token is the whole
credential, and one that is not a live token belongs to nobody), so a guess is a guess at every
tenant's tokens at once; the limit across addresses is each tenant's. A success clears its
address's failures. Counted in the process (a sliding window of monotonic instants, bounded):
several API processes each allow their own, which still bounds guessing, never a lock-out for
good."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

WINDOW_SECONDS = 15 * 60
PER_ADDRESS = 10  # failures from one address in the window
PER_TENANT = 200  # failures from every address together in the window
MAX_ADDRESSES = 10_000  # addresses remembered; the oldest are forgotten first


class LoginThrottle:
    """`wait(address)`: seconds until a login from `address` may be tried again (0: now);
    `failed(address)` and `succeeded(address)` record the outcome."""

    def __init__(
        self,
        *,
        per_address: int = PER_ADDRESS,
        per_tenant: int = PER_TENANT,
        window: float = WINDOW_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._per_address, self._per_tenant, self._window = per_address, per_tenant, window
        self._now = monotonic
        self._lock = threading.Lock()
        self._by_address: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()

    def _trim(self, failures: deque[float], now: float) -> None:
        while failures and failures[0] <= now - self._window:
            failures.popleft()

    def wait(self, address: str) -> float:
        with self._lock:
            now = self._now()
            self._trim(self._all, now)
            waits = [0.0]
            if len(self._all) >= self._per_tenant:
                waits.append(self._all[-self._per_tenant] + self._window - now)
            mine = self._by_address.get(address)
            if mine is not None:
                self._trim(mine, now)
                if len(mine) >= self._per_address:
                    waits.append(mine[-self._per_address] + self._window - now)
            return max(waits)

    def failed(self, address: str) -> None:
        with self._lock:
            now = self._now()
            self._all.append(now)
            while len(self._all) > self._per_tenant:
                self._all.popleft()
            mine = self._by_address.pop(address, None) or deque()
            mine.append(now)
            while len(mine) > self._per_address:
                mine.popleft()
            self._by_address[address] = mine  # last: the most recently failing address
            while len(self._by_address) > MAX_ADDRESSES:
                del self._by_address[next(iter(self._by_address))]

    def succeeded(self, address: str) -> None:
        with self._lock:
            self._by_address.pop(address, None)


__all__ = ["PER_ADDRESS", "PER_TENANT", "WINDOW_SECONDS", "LoginThrottle"]
