"""How the Python client (`recoup.client`) shapes what it sends: bodies and path segments,
and instants as the API takes them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote


def instant(field: str, value: datetime | str) -> str:
    """An instant as the API takes it: an aware datetime in RFC 3339, or RFC 3339 text as
    given (the server checks it, as it checks any client's). A naive datetime is a
    `ValueError` naming `field`: its UTC instant would be a guess about the machine's zone."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"{field}: expected an aware datetime (with a tzinfo, such as "
                f"datetime.now(UTC)) or RFC 3339 text; got the naive {value.isoformat()}"
            )
        return value.isoformat()
    if isinstance(value, str):
        return value
    raise TypeError(
        f"{field}: expected an aware datetime or RFC 3339 text, got {type(value).__name__}"
    )


def target(url: str, method: str, headers: Mapping[str, str] | None, body: Any) -> dict[str, Any]:
    target: dict[str, Any] = {"url": url, "method": method}
    if headers:
        target["headers"] = dict(headers)
    if body is not None:
        target["body"] = body
    return target


def put(payload: dict[str, Any], **values: Any) -> None:
    """Set the fields that were given (absent fields take the server's defaults)."""
    payload.update({k: v for k, v in values.items() if v is not None})


def seg(value: str) -> str:
    """An id as one path segment (an id with a '/' must not reach another route)."""
    return quote(value, safe="")


__all__ = ["instant", "put", "seg", "target"]
