"""Durations as the management commands take them: `90s`, `15m`, `12h`, `7d`, `2w`, or
several at once (`1d12h`)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

from recoup.errors import InvalidInput

UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}  # seconds
MAX_DURATION: Final = timedelta(days=36500)  # a century: anything longer is a typo
_PART = re.compile(r"(\d{1,9})([smhdw])")
_WHOLE = re.compile(r"(?:\d{1,9}[smhdw])+")


def parse_duration(field: str, text: str) -> timedelta:
    """`text` as a positive duration; `InvalidInput` naming `field` otherwise."""
    compact = text.strip().lower()
    if not _WHOLE.fullmatch(compact):
        raise InvalidInput(
            field, text, "expected a duration such as 90s, 15m, 12h, 7d, 2w or 1d12h"
        )
    seconds = sum(int(n) * UNITS[unit] for n, unit in _PART.findall(compact))
    if not 0 < seconds <= MAX_DURATION.total_seconds():
        raise InvalidInput(field, text, "expected a duration above zero and at most 36500d")
    return timedelta(seconds=seconds)


def format_duration(duration: timedelta) -> str:
    """The shortest text `parse_duration` reads back as `duration` (whole seconds)."""
    left = int(duration.total_seconds())
    parts = []
    for unit, size in sorted(UNITS.items(), key=lambda item: -item[1]):
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


__all__ = ["format_duration", "parse_duration"]
