"""Deterministic jitter: the same (invoice, attempt, policy) always gives the same offset.

One function serves the planner (one invoice at a time) and the vectorised replay (millions of
attempts at once), so they cannot drift apart:

1. `invoice_seeds`: BLAKE2b of the invoice id, keyed with the policy's fingerprint, read as an
   unsigned 64-bit integer: one hash per invoice, not per attempt;
2. `jitter_seconds`: the seed and the attempt number mixed with the SplitMix64 finaliser
   (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014) in
   wrap-around uint64 arithmetic, reduced to whole seconds in [0, span].

Python's `hash()` is salted per process and is never used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's increment (2^64 / golden ratio)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def invoice_seeds(invoices: Iterable[str], key: bytes) -> npt.NDArray[np.uint64]:
    """One 64-bit seed per invoice: BLAKE2b-64 of the UTF-8 id, keyed with `key` (≤ 64 bytes)."""
    keyed = hashlib.blake2b(digest_size=8, key=key)

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
    if span_seconds <= 0:
        return np.zeros(np.broadcast(seeds, attempts).shape, dtype=np.int64)
    # Arrays (never numpy scalars) so that uint64 overflow wraps silently, as intended.
    x = np.atleast_1d(seeds).astype(np.uint64) + np.atleast_1d(attempts).astype(np.uint64) * _GOLDEN
    x = (x ^ (x >> _S30)) * _MIX1
    x = (x ^ (x >> _S27)) * _MIX2
    x = x ^ (x >> _S31)
    result: npt.NDArray[np.int64] = (x % np.uint64(span_seconds + 1)).astype(np.int64)
    return result


def attempt_jitters(invoice: str, key: bytes, count: int, span_seconds: int) -> list[int]:
    """The jitter of attempts 1…count of one invoice (what the planner uses)."""
    seeds = np.repeat(invoice_seeds([invoice], key), count)
    attempts = np.arange(1, count + 1, dtype=np.int64)
    return [int(j) for j in jitter_seconds(seeds, attempts, span_seconds)]


__all__ = ["attempt_jitters", "invoice_seeds", "jitter_seconds"]
