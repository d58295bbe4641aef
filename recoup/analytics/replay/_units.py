"""The array type and time units the replay modules share (instants are int64 microseconds)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]

DAY = 86_400  # seconds
US = 1_000_000  # microseconds per second


def to_us(instant: datetime) -> int:
    """Microseconds since the Unix epoch of an aware instant, exactly (no float on the way)."""
    delta = instant - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * DAY + delta.seconds) * US + delta.microseconds
