"""Metadata of jobs and schedules: a flat object of string keys to string values, as Stripe's
`metadata` is, for the caller's own references (an order id, a customer). Recoup never reads
it; it stores it, returns it, copies a schedule's onto the jobs it fires, and filters lists by
it (`metadata[key]=value`, every pair must match).

Limits (Stripe's, but for the key's characters): at most `MAX_KEYS` keys; a key is 1–40 of
`A–Z a–z 0–9 _ - . :` (no brackets, so that `metadata[key]` parses, and no quote, so that a
key is always a plain JSON path step); a value is at most 500 characters and holds no NUL
(which no PostgreSQL text can hold). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from recoup.errors import InvalidInput

MAX_KEYS = 50  # keys per object
MAX_KEY_LENGTH = 40  # characters
MAX_VALUE_LENGTH = 500  # characters
KEY_PATTERN = r"^[A-Za-z0-9_.:-]{1,40}$"
_KEY = re.compile(KEY_PATTERN)
KEY_RULE = f"1–{MAX_KEY_LENGTH} characters of A–Z, a–z, 0–9, '_', '-', '.', ':'"
VALUE_RULE = f"a string of at most {MAX_VALUE_LENGTH} characters, without NUL"

Metadata = dict[str, str]


def check_key(key: object, *, field: str = "metadata") -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise InvalidInput(field, key, f"expected a key of {KEY_RULE}")
    return key


def check_value(key: str, value: object, *, field: str = "metadata") -> str:
    if not isinstance(value, str) or len(value) > MAX_VALUE_LENGTH or "\x00" in value:
        raise InvalidInput(f"{field}.{key}", value, f"expected {VALUE_RULE}")
    return value


def check_metadata(value: object, *, field: str = "metadata") -> Metadata:
    """`value` as metadata (a new dict), or `InvalidInput` naming the field (`metadata`, or
    `metadata.<key>` for a bad value), the value and the limit."""
    if not isinstance(value, Mapping):
        raise InvalidInput(field, value, "expected an object of string keys to string values")
    if len(value) > MAX_KEYS:
        raise InvalidInput(field, f"{len(value)} keys", f"expected at most {MAX_KEYS} keys")
    return {
        check_key(key, field=field): check_value(key, item, field=field)
        for key, item in value.items()
    }


def merge_metadata(
    current: Mapping[str, str], changes: Mapping[str, str | None], *, field: str = "metadata"
) -> Metadata:
    """A PATCH's merge (Stripe's rule): each key of `changes` set to a string replaces or adds
    that key, set to None removes it (absent or not); keys not named stay. The result is
    checked against the limits."""
    merged = dict(current)
    for key, item in changes.items():
        check_key(key, field=field)
        if item is None:
            merged.pop(key, None)
        else:
            merged[key] = check_value(key, item, field=field)
    return check_metadata(merged, field=field)


def check_filter(pairs: Mapping[str, str], *, field: str = "metadata") -> Metadata:
    """A listing's filter: the same rules as stored metadata (a pair that no stored object
    could hold is refused rather than answered with an empty page)."""
    return check_metadata(pairs, field=field)


def as_metadata(value: Any) -> Metadata:
    """Stored metadata (JSON already decoded) as a dict; `{}` for a row without any."""
    return dict(value) if value else {}


__all__ = [
    "KEY_PATTERN",
    "MAX_KEYS",
    "MAX_KEY_LENGTH",
    "MAX_VALUE_LENGTH",
    "Metadata",
    "check_filter",
    "check_key",
    "check_metadata",
    "check_value",
    "merge_metadata",
]
