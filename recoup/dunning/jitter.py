"""Deterministic jitter: the same (invoice, attempt, policy) always gives the same offset.

One function serves the planner (one invoice at a time) and the vectorised replay (millions of
attempts at once), so they cannot drift apart:

1. `invoice_seeds`: BLAKE2b of the invoice id, keyed with the policy's fingerprint, read as an
   unsigned 64-bit integer: one hash per invoice, not per attempt;
2. `jitter_seconds`: the seed and the attempt number mixed with the SplitMix64 finaliser
   (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014) in
   wrap-around uint64 arithmetic, reduced to whole seconds in [0, span].

Python's `hash()` is salted per process and is never used. The planner's path is plain Python
(the core needs no numpy); the vectorised path imports numpy when first called, and a property
test holds the two equal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment (2^64 / golden ratio)
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
MASK64 = (1 << 64) - 1


def _keyed(key: bytes) -> hashlib.blake2b:
    return hashlib.blake2b(digest_size=8, key=key)


def invoice_seed(invoice: str, key: bytes) -> int:
    """The 64-bit seed of one invoice: BLAKE2b-64 of the UTF-8 id, keyed, little-endian."""
    state = _keyed(key)
    state.update(invoice.encode())
    return int.from_bytes(state.digest(), "little")


def jitter_second(seed: int, attempt: int, span_seconds: int) -> int:
    """`jitter_seconds` for one (seed, attempt) pair, in plain integer arithmetic."""
    if span_seconds <= 0:
        return 0
    x = (seed + attempt * GOLDEN) & MASK64
    x = ((x ^ (x >> 30)) * MIX1) & MASK64
    x = ((x ^ (x >> 27)) * MIX2) & MASK64
    x ^= x >> 31
    return x % (span_seconds + 1)


def invoice_seeds(invoices: Iterable[str], key: bytes) -> npt.NDArray[np.uint64]:
    """One 64-bit seed per invoice: BLAKE2b-64 of the UTF-8 id, keyed with `key` (≤ 64 bytes)."""
    import numpy as np

    keyed = _keyed(key)

    def digest(invoice: str) -> bytes:
        # Copying the keyed state skips the key's own compression round on every invoice.
        state = keyed.copy()
        state.update(invoice.encode())
        return state.digest()

    blob = b"".join(map(digest, invoices))
    return np.frombuffer(blob, dtype="<u8").astype(np.uint64)


def jitter_seconds(
    seeds: npt.NDArray[np.uint64], attempts: npt.NDArray[np.integer], span_seconds: int
) -> npt.NDArray[np.int64]:
    """Whole seconds in [0, span_seconds] for each (seed, attempt) pair, element-wise."""
    import numpy as np

    if span_seconds <= 0:
        return np.zeros(np.broadcast(seeds, attempts).shape, dtype=np.int64)
    # Arrays (never numpy scalars) so that uint64 overflow wraps silently, as intended.
    u64 = np.uint64
    x = np.atleast_1d(seeds).astype(u64) + np.atleast_1d(attempts).astype(u64) * u64(GOLDEN)
    x = (x ^ (x >> u64(30))) * u64(MIX1)
    x = (x ^ (x >> u64(27))) * u64(MIX2)
    x = x ^ (x >> u64(31))
    result: npt.NDArray[np.int64] = (x % np.uint64(span_seconds + 1)).astype(np.int64)
    return result


def attempt_jitters(invoice: str, key: bytes, count: int, span_seconds: int) -> list[int]:
    """The jitter of attempts 1…count of one invoice (what the planner uses)."""
    seed = invoice_seed(invoice, key)
    return [jitter_second(seed, n, span_seconds) for n in range(1, count + 1)]


__all__ = [
    "attempt_jitters",
    "invoice_seed",
    "invoice_seeds",
    "jitter_second",
    "jitter_seconds",
]
