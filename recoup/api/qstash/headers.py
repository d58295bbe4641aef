"""QStash's `Upstash-*` request headers read into Recoup's terms: when a message runs, how it is
retried, its method, deadline, forwarded headers and deduplication key. Pure: `now` is an
argument. Every refusal is a 400 naming the header, the value given and what is allowed; a
QStash feature Recoup does not implement is refused by name, never silently ignored.

QStash's semantics followed (upstash.com/docs/qstash; the `qstash` SDK's `prepare_headers`):
`Upstash-Delay` is a duration such as `90s`, `5m`, `1h30m`, `2d`; `Upstash-Not-Before` is Unix
seconds and wins over a delay; `Upstash-Retries` counts retries after the first attempt
(default 3); `Upstash-Forward-<Name>` reaches the destination as `<Name>`; `Upstash-Callback`
and `Upstash-Failure-Callback` name where the message's end is reported.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from recoup.api.echoes import echo_header
from recoup.api.problems import ApiProblem, FieldError
from recoup.jobs.model import HTTP_METHODS, BackoffPolicy

DEFAULT_RETRIES: Final = 3  # QStash's default when `Upstash-Retries` is absent
MAX_RETRIES: Final = 99  # Recoup's limit of 100 attempts, the first included
DEFAULT_TIMEOUT: Final = timedelta(seconds=30)  # as every Recoup job
MAX_TIMEOUT: Final = timedelta(hours=1)  # Recoup's limit on one attempt
MAX_DELAY: Final = timedelta(days=3650)
DEDUP_ID_MAX: Final = 200  # characters of an `Upstash-Deduplication-Id`
# QStash's backoff is min(1 day, e^(2.5·n)) s (12 s, 2.5 min, 30 min, 6 h, then 1 day);
# Recoup's exponential backoff with the same first step and the same cap comes closest.
QSTASH_RETRY_FLOOR: Final = timedelta(seconds=12)
QSTASH_RETRY_CAP: Final = timedelta(days=1)

FORWARD_PREFIX: Final = "upstash-forward-"
# What an SDK says of itself (`@upstash/qstash` sends `Upstash-Telemetry-Sdk`, `-Platform` and
# `-Runtime` on every request): informational, accepted and not kept.
TELEMETRY_PREFIX: Final = "upstash-telemetry-"
_DURATION = re.compile(r"(?:\d+[smhd])+")
_DURATION_PART = re.compile(r"(\d+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}

PUBLISH_HEADERS: Final = frozenset(
    {
        "upstash-method",
        "upstash-retries",
        "upstash-delay",
        "upstash-not-before",
        "upstash-timeout",
        "upstash-deduplication-id",
        "upstash-content-based-deduplication",
        "upstash-callback",
        "upstash-failure-callback",
        "upstash-flow-control-key",
        "upstash-flow-control-value",
    }
)
SCHEDULE_HEADERS: Final = frozenset(
    {
        "upstash-cron",
        "upstash-schedule-id",
        "upstash-method",
        "upstash-retries",
        "upstash-timeout",
        "upstash-callback",
        "upstash-failure-callback",
        "upstash-flow-control-key",
        "upstash-flow-control-value",
    }
)
# Recoup's names of the callback fields, as QStash's headers (a refusal names the header).
CALLBACK_HEADERS: Final = {
    "callback": "Upstash-Callback",
    "failure_callback": "Upstash-Failure-Callback",
}
# Features of QStash that Recoup does not offer, with what to do instead.
_UNSUPPORTED: Final = {
    "upstash-retry-delay": "retry delay expressions are not supported (QStash's backoff is used)",
    "upstash-queue-name": "queues are not supported",
    "upstash-label": "labels are not supported",
    "upstash-redact-fields": "redaction is not supported",
    "upstash-delay": "a delay per schedule occurrence is not supported",
}


def refuse(header: str, value: object, allowed: str, *, slug: str = "invalid-header") -> ApiProblem:
    """The 400 for one header (or field): names it, echoes the value (as `echo_header` makes
    it safe: UTF-8, printable, cut with its length), says what is allowed."""
    shown = echo_header(str(value))
    return ApiProblem(
        400,
        f"qstash-{slug}",
        f"{header}: {shown!r} is not accepted; {allowed}",
        errors=[FieldError(field=header, message=allowed, value=shown)],
    )


def check_known(headers: Mapping[str, str], supported: frozenset[str]) -> None:
    """400 for an `Upstash-*` header outside `supported` (forwarded headers aside), naming it:
    an unsupported feature says so, an unknown name lists the supported ones."""
    for name, value in headers.items():
        lowered = name.lower()
        if not lowered.startswith("upstash-") or lowered in supported:
            continue
        if lowered.startswith((FORWARD_PREFIX, TELEMETRY_PREFIX)):
            continue
        if lowered.startswith(("upstash-callback-", "upstash-failure-callback-")):
            reason = (
                "headers forwarded to a callback are not supported (the callback is sent "
                "with QStash's own headers: Upstash-Signature, Content-Type)"
            )
        else:
            reason = _UNSUPPORTED.get(lowered) or (
                "unknown header; supported: "
                + ", ".join(sorted(supported))
                + ", Upstash-Forward-<Name>"
            )
        raise refuse(canonical(name), value, reason, slug="unsupported-header")


def callbacks(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """`Upstash-Callback` and `Upstash-Failure-Callback`: where a message's end is reported
    (`recoup.jobs.callbacks`: once it was delivered, or once its retries are spent; in
    QStash's callback body). Each an http(s) URL; the SSRF guard checks them with the
    destination."""
    found: list[str | None] = []
    for header in CALLBACK_HEADERS.values():
        value = headers.get(header.lower())
        if value is not None and not value.startswith(("http://", "https://")):
            raise refuse(header, value, "expected an http:// or https:// URL")
        found.append(value)
    return found[0], found[1]


def canonical(name: str) -> str:
    """A header name as QStash's documentation spells it (`upstash-callback` arrives lowered)."""
    return "-".join(part.capitalize() for part in name.split("-"))


def duration(header: str, value: str, *, limit: timedelta) -> timedelta:
    """`90s`, `5m`, `1h30m`, `2d` (or a bare number of seconds) as a duration up to `limit`."""
    text = value.strip()
    if text.isdigit():
        text += "s"
    if not _DURATION.fullmatch(text):
        raise refuse(header, value, "expected a duration such as 30s, 5m, 1h30m or 2d")
    seconds = sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    if seconds > limit.total_seconds():
        raise refuse(header, value, f"expected at most {int(limit.total_seconds())} seconds")
    return timedelta(seconds=seconds)


def run_at(headers: Mapping[str, str], *, now: datetime) -> datetime:
    """When the message is due: `Upstash-Not-Before` if given, else now + `Upstash-Delay`."""
    not_before = headers.get("upstash-not-before")
    if not_before is not None:
        if not not_before.strip().isdigit():
            raise refuse("Upstash-Not-Before", not_before, "expected Unix seconds (UTC)")
        seconds = int(not_before)
        if seconds > (now + MAX_DELAY).timestamp():
            raise refuse("Upstash-Not-Before", not_before, "expected at most ten years ahead")
        return datetime.fromtimestamp(seconds, UTC)
    delay = headers.get("upstash-delay")
    if delay is None:
        return now
    return now + duration("Upstash-Delay", delay, limit=MAX_DELAY)


def retry_policy(headers: Mapping[str, str]) -> BackoffPolicy:
    value = headers.get("upstash-retries")
    retries = DEFAULT_RETRIES
    if value is not None:
        if not value.strip().isdigit() or int(value) > MAX_RETRIES:
            raise refuse("Upstash-Retries", value, f"expected an integer 0–{MAX_RETRIES}")
        retries = int(value)
    return BackoffPolicy(
        max_attempts=retries + 1, min_backoff=QSTASH_RETRY_FLOOR, max_backoff=QSTASH_RETRY_CAP
    )


def method(headers: Mapping[str, str]) -> str:
    value = headers.get("upstash-method", "POST")
    if value.upper() not in HTTP_METHODS:
        raise refuse("Upstash-Method", value, f"expected one of {', '.join(HTTP_METHODS)}")
    return value.upper()


def timeout(headers: Mapping[str, str]) -> timedelta:
    value = headers.get("upstash-timeout")
    if value is None:
        return DEFAULT_TIMEOUT
    found = duration("Upstash-Timeout", value, limit=MAX_TIMEOUT)
    if found <= timedelta(0):
        raise refuse("Upstash-Timeout", value, "expected at least 1s")
    return found


def forwarded(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers the destination receives: `Upstash-Forward-*` without the prefix, and the
    request's `Content-Type`, as QStash passes them."""
    sent = {
        name[len(FORWARD_PREFIX) :]: value
        for name, value in headers.items()
        if name.lower().startswith(FORWARD_PREFIX) and len(name) > len(FORWARD_PREFIX)
    }
    content_type = headers.get("content-type")
    if content_type:
        sent["Content-Type"] = content_type
    return sent


@dataclass(frozen=True, slots=True)
class Dedup:
    """A publish's deduplication: the job idempotency key it runs under (None: none)."""

    key: str | None


def dedup(
    headers: Mapping[str, str], *, destination: str, method: str, body: str, sent: dict[str, str]
) -> Dedup:
    """`Upstash-Deduplication-Id` → key `qstash:id:{id}`; `Upstash-Content-Based-Deduplication:
    True` → key `qstash:content:{sha256 of destination, method, body and forwarded headers}`.
    A publish whose key a job of the tenant already holds is that job (`deduplicated`)."""
    given = headers.get("upstash-deduplication-id")
    if given is not None:
        if not 1 <= len(given) <= DEDUP_ID_MAX:
            raise refuse("Upstash-Deduplication-Id", given, f"expected 1–{DEDUP_ID_MAX} characters")
        return Dedup(f"qstash:id:{given}")
    by_content = headers.get("upstash-content-based-deduplication")
    if by_content is None or by_content.lower() == "false":
        return Dedup(None)
    if by_content.lower() != "true":
        raise refuse("Upstash-Content-Based-Deduplication", by_content, "expected true or false")
    content = json.dumps([destination, method, body, sorted(sent.items())])
    return Dedup("qstash:content:" + hashlib.sha256(content.encode()).hexdigest())


__all__ = [
    "CALLBACK_HEADERS",
    "PUBLISH_HEADERS",
    "SCHEDULE_HEADERS",
    "Dedup",
    "callbacks",
    "canonical",
    "check_known",
    "dedup",
    "duration",
    "forwarded",
    "method",
    "refuse",
    "retry_policy",
    "run_at",
    "timeout",
]
