"""Instants: timezone-aware datetimes, normalised to UTC, and their ISO-8601 text.

Instants taken from input (`to_utc`, `parse_instant`) must fall in the UTC years
`MIN_YEAR`–`MAX_YEAR`: earlier or later is a typo, not a plan, and the bound keeps every
offset, retry gap and renewal step added later inside what `datetime` can represent (year
9999), so no arithmetic downstream can overflow.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from recoup.errors import InvalidInput

MIN_YEAR: Final = 1970  # earliest UTC year of an accepted instant
MAX_YEAR: Final = 9000  # latest UTC year of an accepted instant
RANGE_ALLOWED: Final = f"expected an instant in the years {MIN_YEAR}–{MAX_YEAR} (UTC)"


def require_aware(field: str, value: datetime) -> datetime:
    """Refuse naive datetimes: an instant without a zone means a different moment on every
    machine."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(field, value.isoformat(), "expected a timezone-aware instant")
    return value


def to_utc(field: str, value: datetime) -> datetime:
    """`value` (aware) in UTC; `InvalidInput` naming `field` outside `MIN_YEAR`–`MAX_YEAR`."""
    return require_in_range(field, require_aware(field, value))


def require_in_range(field: str, value: datetime) -> datetime:
    """The aware `value` in UTC, refused (naming `field`) unless its UTC year is within
    `MIN_YEAR`–`MAX_YEAR`. `0001-01-01T00:00+14:00` is before year 1 in UTC: refused here
    rather than overflowing."""
    try:
        instant = value.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(field, value.isoformat(), RANGE_ALLOWED) from None
    if not MIN_YEAR <= instant.year <= MAX_YEAR:
        raise InvalidInput(field, value.isoformat(), RANGE_ALLOWED)
    return instant


def format_utc(instant: datetime) -> str:
    """`2026-02-28T14:00:00Z`: seconds precision unless there are microseconds."""
    instant = instant.astimezone(UTC)
    text = instant.isoformat(timespec="microseconds" if instant.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def format_local(instant: datetime) -> str:
    """`2026-02-28T09:00:00-05:00`: local wall time with its offset."""
    return instant.isoformat(timespec="microseconds" if instant.microsecond else "seconds")


def parse_instant(field: str, text: str) -> datetime:
    """Parse an ISO-8601 instant that carries its offset (`Z` or `±hh:mm`)."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(
            field, text, "expected an ISO-8601 instant with an offset, e.g. 2026-06-23T15:00:00Z"
        ) from None
    if value.tzinfo is None:
        raise InvalidInput(
            field, text, "expected an ISO-8601 instant with an offset, e.g. 2026-06-23T15:00:00Z"
        )
    try:
        return require_in_range(field, value)
    except InvalidInput:
        raise InvalidInput(field, text, RANGE_ALLOWED) from None
