"""What a problem may echo of a request, made safe: short, printable, and encodable.

Two kinds of echo. `echo` fits a value from a JSON body (already text): its lone surrogates
replaced, cut to a limit. `echo_header` fits a header value, which arrives as bytes that
Starlette decodes as latin-1 (so "é" sent as UTF-8 reads "Ã©"): it is read back as the UTF-8
the client almost surely meant, with invalid bytes replaced, every character that would not
print shown as an escape (`\\x07`, `\\u200b`), and anything longer than `HEADER_ECHO_LIMIT`
cut with "…" and its real length, so a 5,000-character key answers in one line.
"""

from __future__ import annotations

import json
import math
import re

ECHO_LIMIT = 200  # characters of a client's value (or key) echoed back in a problem
HEADER_ECHO_LIMIT = 64  # characters of a header value (an Idempotency-Key) echoed back
QUOTE_LIMIT = 64  # characters of a value quoted in a `detail` ("got …")

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")  # what JSON can carry and UTF-8 cannot


def echo(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text` fit to be echoed: lone surrogates replaced by U+FFFD, and at most `limit`
    characters (the last an ellipsis when it was cut)."""
    text = _LONE_SURROGATE.sub("\ufffd", text)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _printable(char: str) -> str:
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def echo_text(text: str, limit: int = HEADER_ECHO_LIMIT) -> str:
    """`text` on one line: lone surrogates replaced, non-printable characters escaped, at most
    `limit` characters of it, then "… (N characters)" when it was cut."""
    text = _LONE_SURROGATE.sub("\ufffd", text)
    shown = "".join(_printable(c) for c in text[:limit])
    return f"{shown}\u2026 ({len(text)} characters)" if len(text) > limit else shown


def echo_header(value: str, limit: int = HEADER_ECHO_LIMIT) -> str:
    """A header value (as Starlette decodes it, latin-1) fit to be echoed: its bytes read as
    UTF-8 with U+FFFD for what is not, then `echo_text`."""
    try:
        text = value.encode("latin-1").decode("utf-8", errors="replace")
    except UnicodeEncodeError:  # not from a header after all: already text
        text = value
    return echo_text(text, limit)


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """A JSON value as a detail quotes it ("got …"): JSON text, so `"60"` reads as the string
    it is, cut to `limit` characters; an array or object only by its kind."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, bytes):
        return f"{len(value)} bytes"
    if isinstance(value, str):
        text = json.dumps(_LONE_SURROGATE.sub("\ufffd", value), ensure_ascii=False)
    elif isinstance(value, float) and not math.isfinite(value):
        text = str(value)  # JSON cannot carry NaN or infinities; their text can
    else:
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            text = str(value)
    return echo(text, limit)


__all__ = [
    "ECHO_LIMIT",
    "HEADER_ECHO_LIMIT",
    "QUOTE_LIMIT",
    "echo",
    "echo_header",
    "echo_text",
    "quote",
]
