"""W3C Trace Context (w3.org/TR/trace-context) on a job: the `traceparent` and `tracestate` of
the request that created it, checked here, stored with the job and sent on every delivery
(`recoup.jobs.targets.delivery_headers`). Pure.

`traceparent` is `version-traceid-parentid-flags` in lowercase hex: version 00 has exactly
these four fields (a later version may add fields after them, which are kept as given);
version ff, a trace id or a parent id of zeros are invalid. `tracestate` is at most 32
comma-separated `key=value` members (keys lowercase, `tenant@system` allowed; values printable
ASCII without `,` and `=`, not ending in a space), 512 characters at most, and only with a
`traceparent`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from recoup.errors import InvalidInput

TRACESTATE_MAX: Final = 512  # characters, the length the spec asks every vendor to keep
TRACESTATE_MEMBERS: Final = 32
_TRACEPARENT = re.compile(
    r"(?P<version>[0-9a-f]{2})-(?P<trace_id>[0-9a-f]{32})-(?P<parent_id>[0-9a-f]{16})"
    r"-(?P<flags>[0-9a-f]{2})(?P<rest>-.*)?"
)
# Every stored `traceparent` matches this, in the dialect JSON Schema and Python's `re` share
# (`[^\n]` is what `.` means to `re`): what the API's answers state of the field.
TRACEPARENT_PATTERN: Final = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(?:-[^\n]*)?$"
_KEY = re.compile(
    r"[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13}"
)
_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
TRACEPARENT_ALLOWED: Final = (
    "expected a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, "
    "lowercase, ids not all zeros"
)
TRACESTATE_ALLOWED: Final = (
    f"expected a W3C tracestate: at most {TRACESTATE_MEMBERS} comma-separated key=value "
    f"members, {TRACESTATE_MAX} characters, each key once, with a traceparent"
)


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A producer's trace context, as given (checked by `trace_context`)."""

    traceparent: str
    tracestate: str | None = None

    @property
    def trace_id(self) -> str:
        return self.traceparent[3:35]

    @property
    def parent_id(self) -> str:
        return self.traceparent[36:52]

    @property
    def sampled(self) -> bool:
        return bool(int(self.traceparent[53:55], 16) & 1)

    def headers(self) -> dict[str, str]:
        """The headers a delivery carries."""
        found = {"traceparent": self.traceparent}
        if self.tracestate:
            found["tracestate"] = self.tracestate
        return found


def _check_traceparent(value: str) -> str:
    text = value.strip()
    match = _TRACEPARENT.fullmatch(text)
    if match is None or match["version"] == "ff":
        raise InvalidInput("traceparent", value, TRACEPARENT_ALLOWED)
    if match["version"] == "00" and match["rest"] is not None:
        raise InvalidInput("traceparent", value, TRACEPARENT_ALLOWED)
    if set(match["trace_id"]) == {"0"} or set(match["parent_id"]) == {"0"}:
        raise InvalidInput("traceparent", value, TRACEPARENT_ALLOWED)
    return text


def _check_tracestate(value: str) -> str | None:
    text = value.strip()
    if len(text) > TRACESTATE_MAX:
        raise InvalidInput("tracestate", value, TRACESTATE_ALLOWED)
    members = [member.strip() for member in text.split(",") if member.strip()]
    if len(members) > TRACESTATE_MEMBERS:
        raise InvalidInput("tracestate", value, TRACESTATE_ALLOWED)
    keys = set()
    for member in members:
        key, equals, member_value = member.partition("=")
        if not equals or not _KEY.fullmatch(key) or not _VALUE.fullmatch(member_value):
            raise InvalidInput("tracestate", value, TRACESTATE_ALLOWED)
        if key in keys:
            raise InvalidInput("tracestate", value, TRACESTATE_ALLOWED)
        keys.add(key)
    return ",".join(members) or None


def trace_context(traceparent: str | None, tracestate: str | None = None) -> TraceContext | None:
    """The trace context of a creating request's headers, or None without a `traceparent`;
    `InvalidInput` naming the header for a malformed one, or a `tracestate` alone."""
    if traceparent is None:
        if tracestate is not None and tracestate.strip():
            raise InvalidInput("tracestate", tracestate, TRACESTATE_ALLOWED)
        return None
    parent = _check_traceparent(traceparent)
    state = None if tracestate is None else _check_tracestate(tracestate)
    return TraceContext(parent, state)


__all__ = [
    "TRACEPARENT_ALLOWED",
    "TRACEPARENT_PATTERN",
    "TRACESTATE_ALLOWED",
    "TRACESTATE_MAX",
    "TraceContext",
    "trace_context",
]
