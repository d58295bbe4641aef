"""Instants: timezone-aware datetimes, normalised to UTC, and their ISO-8601 text."""

from __future__ import annotations

from datetime import UTC, datetime

from recoup.errors import InvalidInput


def require_aware(field: str, value: datetime) -> datetime:
    """Refuse naive datetimes: an instant without a zone means a different moment on every
    machine."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(field, value.isoformat(), "expected a timezone-aware instant")
    return value


def to_utc(field: str, value: datetime) -> datetime:
    return require_aware(field, value).astimezone(UTC)


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
    return value.astimezone(UTC)
