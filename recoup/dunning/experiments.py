"""The deterministic split of invoices between the two arms of a policy experiment.

`assign_arm(tenant, invoice_id, experiment, share_b)` hashes the three names with SHA-256
(each length-prefixed, so `("ab", "c")` and `("a", "bc")` differ) and reads the top 53 bits
of the digest as a fraction u in [0, 1): arm "b" when u < share_b, else "a". The same invoice
always lands in the same arm, in every process (Python's salted `hash()` is never used);
raising `share_b` only moves invoices from a to b, never back; a new experiment name
reshuffles independently.
"""

from __future__ import annotations

import hashlib
import math
from typing import Literal

from recoup.errors import InvalidInput

Arm = Literal["a", "b"]
_BITS = 53  # a double holds 53 bits exactly: u stays below 1, never rounds up to it


def arm_fraction(tenant: str, invoice_id: str, experiment: str) -> float:
    """The invoice's fixed point u in [0, 1) for this experiment."""
    digest = hashlib.sha256()
    for part in (tenant, experiment, invoice_id):
        data = part.encode()
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return (int.from_bytes(digest.digest()[:8], "big") >> (64 - _BITS)) / (1 << _BITS)


def assign_arm(tenant: str, invoice_id: str, experiment: str, share_b: float) -> Arm:
    """The arm ("a" or "b") of an invoice; a share `share_b` of invoices go to "b"."""
    if (
        isinstance(share_b, bool)
        or not isinstance(share_b, float | int)
        or math.isnan(share_b)
        or not 0 <= share_b <= 1
    ):
        raise InvalidInput("share_b", share_b, "expected a share between 0 and 1")
    return "b" if arm_fraction(tenant, invoice_id, experiment) < share_b else "a"


__all__ = ["Arm", "arm_fraction", "assign_arm"]
