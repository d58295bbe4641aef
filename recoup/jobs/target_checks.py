"""The checks of an HTTP target at creation, before anything is stored: its method (and no body
with HEAD or OPTIONS), the characters of its URL, and its headers' names and values; what would
only fail at send time fails here. (The SSRF guard, `recoup.jobs.ssrf`, checks the URL's host;
`check_callback_url` runs both on a callback URL.)"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from recoup.errors import InvalidInput
from recoup.jobs.model import BODILESS_METHODS, HTTP_METHODS, HttpTarget, Target
from recoup.jobs.ssrf import SsrfGuard, TargetRefused

# RFC 9110 §5.1: a field name is a token; §5.5: a field value is visible ASCII with inner
# spaces or tabs (obs-text is refused: httpx sends header values as ASCII).
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"([\x21-\x7e]([ \t]*[\x21-\x7e])*)?")
_URL_FORBIDDEN = re.compile(r"[\x00-\x20\x7f]")  # whitespace and control characters
# Headers a target may not set (compared case-insensitively): framing and routing, which the
# HTTP client derives from the URL and body (a forged Host or Content-Length smuggles
# requests), and what each delivery stamps itself: its Idempotency-Key, the Standard Webhooks
# headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`) that receivers verify, and
# Recoup's own (`Recoup-Job-Id`, `Recoup-Attempt`, …: `targets.delivery_headers`).
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "idempotency-key"}
)
RESERVED_HEADER_PREFIXES = ("webhook-", "recoup-")
# Bounds of one header field, in characters: what common servers take on one line (nginx's
# and Node's 8 KiB header buffers; a longer value is refused by the receiver at every send).
MAX_HEADER_NAME = 256
MAX_HEADER_VALUE = 8192


def check_method(target: HttpTarget, payload: Any = None) -> None:
    """`InvalidInput` naming `target.method` for a method outside `HTTP_METHODS` (in any case),
    or naming the body (`target.body`, else the job's `payload`, which is sent in its place)
    given to a HEAD or OPTIONS target, which sends none (see `BODILESS_METHODS`)."""
    method = target.method.upper()
    if method not in HTTP_METHODS:
        raise InvalidInput("target.method", target.method, f"expected one of {HTTP_METHODS}")
    if method in BODILESS_METHODS:
        for field, value in (("target.body", target.body), ("payload", payload)):
            if value is not None:
                raise InvalidInput(field, value, f"expected no body with {method}")


def check_url_text(url: str) -> None:
    """`InvalidInput` naming `target.url` for a URL with whitespace or control characters,
    which no request can carry (percent-encode them: `%20`)."""
    found = _URL_FORBIDDEN.search(url)
    if found is not None:
        raise InvalidInput(
            "target.url",
            url,
            f"expected a URL without spaces or control characters (found {found.group()!r} "
            f"at {found.start()}; percent-encode it)",
        )


def check_headers(headers: Mapping[str, str]) -> None:
    """`InvalidInput` naming `target.headers` for a header that cannot be sent: a name that
    is not an RFC 9110 token, a reserved name (`RESERVED_HEADERS`, `webhook-*`, `recoup-*`, in
    any case), or a value with CR, LF, NUL, other controls, non-ASCII characters, or leading or
    trailing whitespace."""
    for name, value in headers.items():
        if isinstance(name, str) and len(name) > MAX_HEADER_NAME:
            raise InvalidInput(
                "target.headers",
                f"{name[:40]}… ({len(name)} characters)",
                f"expected header names of at most {MAX_HEADER_NAME} characters",
            )
        if isinstance(value, str) and len(value) > MAX_HEADER_VALUE:
            raise InvalidInput(
                f"target.headers.{name}",
                f"{value[:40]}… ({len(value)} characters)",
                f"expected header values of at most {MAX_HEADER_VALUE} characters",
            )
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise InvalidInput(
                "target.headers",
                name,
                "expected header names made of letters, digits and !#$%&'*+-.^_`|~",
            )
        lowered = name.lower()
        if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_HEADER_PREFIXES):
            raise InvalidInput(
                "target.headers",
                name,
                f"header {name!r} is set by Recoup itself and cannot be overridden (reserved: "
                "Host, Content-Length, Transfer-Encoding, Connection, Idempotency-Key, "
                "webhook-*, recoup-*)",
            )
        if not isinstance(value, str) or not _HEADER_VALUE.fullmatch(value):
            raise InvalidInput(
                "target.headers",
                {name: value},
                "expected header values of printable ASCII without CR, LF or control "
                "characters, and no leading or trailing whitespace",
            )


def check_callback_url(guard: SsrfGuard, field: str, url: str) -> None:
    """A callback URL (`HttpTarget.callback`, `failure_callback`) passes the target URL's
    checks: its characters, scheme and host, and the SSRF guard; a refusal names `field`."""
    try:
        check_url_text(url)
        guard.check_url(url)
    except TargetRefused as exc:
        raise TargetRefused(exc.value, exc.rule, exc.reason, field=field) from None
    except InvalidInput as exc:
        raise InvalidInput(field, exc.value, exc.allowed) from None


def check_target(guard: SsrfGuard, target: Target, payload: Any = None) -> Target:
    """Every check of a target at creation: for an HTTP target its method (and no body with
    HEAD or OPTIONS, `payload` included: it is sent as the body), URL characters, headers, and
    the SSRF guard on its URL and callbacks. Returns the target."""
    if isinstance(target, HttpTarget):
        check_method(target, payload)
        check_url_text(target.url)
        check_headers(target.headers)
        guard.check_url(target.url)
        for field, url in (
            ("callback", target.callback),
            ("failure_callback", target.failure_callback),
        ):
            if url is not None:
                check_callback_url(guard, field, url)
    return target


def target_looks_up(guard: SsrfGuard, target: Target) -> bool:
    """Whether `check_target` would ask DNS (the guard resolving a host name of the target's
    URL or callbacks): work for a thread, not an event loop."""
    if not isinstance(target, HttpTarget):
        return False
    urls = (target.url, target.callback, target.failure_callback)
    return any(url is not None and guard.looks_up(url) for url in urls)
