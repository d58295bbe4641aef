"""QStash's flow-control headers read into Recoup's terms: `Upstash-Flow-Control-Key: KEY` and
`Upstash-Flow-Control-Value: parallelism=2, rate=3, period=1s` (either of parallelism and rate
may be absent, not both; `period` is the window of `rate`, one second unless given, as
`10s`, `5m`, `1h` or `2d`). Pure; every refusal is a 400 naming the header, as the other
`Upstash-*` headers are refused (`headers.refuse`).

QStash's semantics followed (upstash.com/docs/qstash/features/flowcontrol; the TypeScript
SDK's `processHeaders`, which writes the value as `parallelism=N, rate=N, period=Ns`): a
message names a key; at most `parallelism` of the key's messages are delivered at once and at
most `rate` are started per `period`, across every message with that key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from recoup.api.qstash.headers import duration, refuse
from recoup.jobs.flow import (
    DEFAULT_FLOW_PERIOD,
    MAX_FLOW_PARALLELISM,
    MAX_FLOW_PERIOD,
    MAX_FLOW_RATE,
    FlowLimits,
)
from recoup.jobs.model import Job

KEY_HEADER: Final = "Upstash-Flow-Control-Key"
VALUE_HEADER: Final = "Upstash-Flow-Control-Value"
KEY_MAX: Final = 200  # characters of a key, as a deduplication id
LIMIT_MAX: Final = min(MAX_FLOW_RATE, MAX_FLOW_PARALLELISM)  # Recoup's own limits
_KEY = re.compile(r"[A-Za-z0-9_.:\-]+")
_PARTS: Final = ("parallelism", "rate", "period")


@dataclass(frozen=True, slots=True)
class FlowControl:
    """A message's flow-control key with its limits (`parallelism`: at most N delivered at
    once; `rate` per `period`: at most N started per window); None where not given."""

    key: str
    parallelism: int | None
    rate: int | None
    period: timedelta


def _limit(part: str, text: str, whole: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= LIMIT_MAX:
        raise refuse(VALUE_HEADER, whole, f"expected {part}=<an integer 1–{LIMIT_MAX}>")
    return int(text)


def _all(headers: Mapping[str, str], name: str) -> list[str]:
    """Every value of a header given more than once (Starlette's `getlist`), else the one."""
    getlist = getattr(headers, "getlist", None)
    if getlist is not None:
        return list(getlist(name))
    found = headers.get(name)
    return [] if found is None else [found]


def flow_control(headers: Mapping[str, str]) -> FlowControl | None:
    """The request's flow control, or None without `Upstash-Flow-Control-Key`. A value without
    a key, a key without a value, an unknown or repeated part, a period without a rate: 400."""
    for name in (KEY_HEADER, VALUE_HEADER):
        values = _all(headers, name.lower())
        if len(values) > 1:
            # QStash puts a message under one key (its value may hold a rate and a
            # parallelism): a second key would be dropped unseen, so it is refused.
            raise refuse(name, ", ".join(values), "expected one per message (one flow key)")
    key = headers.get(KEY_HEADER.lower())
    value = headers.get(VALUE_HEADER.lower())
    if key is None and value is None:
        return None
    if key is None:
        raise refuse(KEY_HEADER, "", f"expected a key with {VALUE_HEADER}")
    if not 1 <= len(key) <= KEY_MAX or not _KEY.fullmatch(key):
        raise refuse(KEY_HEADER, key, f"expected 1–{KEY_MAX} letters, digits, '_', '.', ':' or '-'")
    if value is None or not value.strip():
        raise refuse(
            VALUE_HEADER, value or "", "expected parallelism=N and/or rate=N[, period=<duration>]"
        )
    given: dict[str, str] = {}
    for piece in value.split(","):
        name, equals, text = piece.strip().partition("=")
        name = name.strip().lower()
        if not equals or name not in _PARTS or name in given:
            raise refuse(
                VALUE_HEADER,
                value,
                "expected comma-separated parallelism=N, rate=N, period=<duration>, each once",
            )
        given[name] = text.strip()
    parallelism, rate = (
        _limit(part, given[part], value) if part in given else None for part in _PARTS[:2]
    )
    if parallelism is None and rate is None:
        raise refuse(VALUE_HEADER, value, "expected at least one of parallelism=N and rate=N")
    period = DEFAULT_FLOW_PERIOD
    if "period" in given:
        if rate is None:
            raise refuse(VALUE_HEADER, value, "period is the window of rate: give rate=N with it")
        period = duration(VALUE_HEADER, given["period"], limit=MAX_FLOW_PERIOD)
        if period <= timedelta(0):
            raise refuse(VALUE_HEADER, value, "expected a period of at least 1s")
    return FlowControl(key=key, parallelism=parallelism, rate=rate, period=period)


def flow_control_value(found: FlowControl) -> str:
    """The header's value as QStash writes it back (a message's JSON echoes it)."""
    parts = []
    if found.parallelism is not None:
        parts.append(f"parallelism={found.parallelism}")
    if found.rate is not None:
        parts.append(f"rate={found.rate}")
        parts.append(f"period={int(found.period.total_seconds())}s")
    return ", ".join(parts)


def schedule_limits(found: FlowControl | None) -> FlowLimits | None:
    """A schedule's flow limits (`recoup.jobs.flow.FlowLimits`: given to every job it fires)."""
    if found is None:
        return None
    return FlowLimits(
        key=found.key, rate=found.rate, period=found.period, parallelism=found.parallelism
    )


def schedule_fields(limits: FlowLimits | None) -> dict[str, Any]:
    """A schedule's flow control in QStash's JSON, as a message's (`message_fields`)."""
    if limits is None:
        return {}
    found: dict[str, Any] = {"flowControlKey": limits.key}
    if limits.parallelism is not None:
        found["parallelism"] = limits.parallelism
    if limits.rate is not None:
        found["rate"] = limits.rate
        found["period"] = int(limits.period.total_seconds())
    return found


def job_fields(found: FlowControl | None) -> dict[str, Any]:
    """The flow fields of a `NewJob` (`recoup.jobs.flow`) for a message's flow control."""
    if found is None:
        return {}
    return {
        "flow_key": found.key,
        "flow_rate": found.rate,
        "flow_period": found.period,
        "flow_parallelism": found.parallelism,
    }


def message_fields(job: Job) -> dict[str, Any]:
    """A message's flow control in QStash's JSON: `flowControlKey`, `parallelism`, `rate`,
    `period` (seconds), as the SDKs read them; nothing for a job without a key."""
    if job.flow_key is None:
        return {}
    found: dict[str, Any] = {"flowControlKey": job.flow_key}
    if job.flow_parallelism is not None:
        found["parallelism"] = job.flow_parallelism
    if job.flow_rate is not None:
        found["rate"] = job.flow_rate
        found["period"] = int(job.flow_period.total_seconds())
    return found


__all__ = [
    "KEY_HEADER",
    "VALUE_HEADER",
    "FlowControl",
    "flow_control",
    "flow_control_value",
    "job_fields",
    "message_fields",
    "schedule_fields",
    "schedule_limits",
]
