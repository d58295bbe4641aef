"""The regular expressions the API both states in /openapi.json and enforces: a request whose
strings match them is accepted (as far as its text goes), one that does not is refused.

Each is written once here in the dialect common to JSON Schema (ECMA-262), pydantic's Rust
engine and Python's `re`: no lookaround, no inline flags (case-insensitive parts spell both
cases), anchored with `^…$`. Where the layers below accept more, the API accepts exactly what
it states, so a client generated from the document and the server agree.
"""

from __future__ import annotations

from typing import Final

from recoup.storage.job_rows import CURSOR_PATTERN, RUN_CURSOR_PATTERN

NO_NUL: Final = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL
NO_NUL_OR_AT: Final = r"^[^\x00@]*$"  # '@' separates a schedule's name and an occurrence's instant
# A name: no '@' and no control character (C0, DEL, C1), which terminals and logs would obey.
PRINTABLE_NO_AT: Final = r"^[^\x00-\x1f\x7f-\x9f@]*$"
# No C0 control, DEL or C1 control (recoup.jobs.model.CONTROL_CHARACTER): printed by terminals.
PRINTABLE: Final = r"^[^\x00-\x1f\x7f-\x9f]*$"


def _either_case(word: str) -> str:
    """`http` → `[Hh][Tt][Tt][Pp]`: a case-insensitive literal without inline flags (for words
    of letters and hyphens, which need no escape outside a class)."""
    assert all(c.isalpha() or c == "-" for c in word), word
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in word)


# -- URLs: http(s), an ASCII host (punycode for international names), an optional port -----

_H16 = "[0-9A-Fa-f]{1,4}"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"  # no leading zeros, as `ipaddress`
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"
# RFC 3986 §3.2.2 IPv6address, one alternative per place the `::` may stand.
_IPV6 = (
    "(?:"
    + "|".join(
        [
            f"(?:{_H16}:){{6}}{_LS32}",
            f"::(?:{_H16}:){{5}}{_LS32}",
            f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
            f"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
            f"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
            f"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
            f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
            f"(?:(?:{_H16}:){{0,6}}{_H16})?::",
        ]
    )
    + ")"
)
_REG_NAME = r"[A-Za-z0-9\-._~!$&'()*+,;=%]+"  # RFC 3986 reg-name, ASCII only
_USERINFO = r"[A-Za-z0-9\-._~!$&'()*+,;=%:]*@"
_PORT = "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
# After the authority: a path, query or fragment of anything but whitespace and controls
# (`recoup.jobs.target_checks.check_url_text`; percent-encode those).
_REST = r"(?:[/?#][^\x00-\x20\x7f]*)?"
HTTP_URL: Final = (
    f"^{_either_case('http')}[Ss]?://(?:{_USERINFO})?(?:{_REG_NAME}|\\[{_IPV6}\\])"
    f"(?::{_PORT})?{_REST}$"
)

# -- HTTP header fields of a target (`recoup.jobs.target_checks.check_headers`) ------------

HEADER_NAME: Final = r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$"  # an RFC 9110 token
HEADER_VALUE: Final = r"^(?:[\x21-\x7e](?:[ \t]*[\x21-\x7e])*)?$"  # visible ASCII, no edge space
# The names Recoup sets itself (`recoup.jobs.target_checks.RESERVED_HEADERS` and prefixes).
RESERVED_HEADER: Final = (
    "^(?:"
    + "|".join(
        [
            *(
                _either_case(name)
                for name in (
                    "host",
                    "content-length",
                    "transfer-encoding",
                    "connection",
                    "idempotency-key",
                )
            ),
            *(_either_case(prefix) + ".*" for prefix in ("webhook-", "recoup-")),
        ]
    )
    + ")$"
)

# -- Date-times ------------------------------------------------------------------------------

# The start of an instant (RFC 3339 `date-time`, which the document states beside it): a year
# written 1971–8999, so that whatever its offset (±23:59 at most) it falls inside the years
# instants may take (1970–9000 in UTC, `recoup.timekeeping.instants`), and seconds 00–59 (no
# leap second, which Python's datetime cannot hold).
INSTANT: Final = (
    r"^(?:197[1-9]|19[89][0-9]|[2-8][0-9]{3})-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-5][0-9]"
)

_YEAR = "(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"  # 0001–9999
# Gregorian leap years: divisible by 4, and centuries only when divisible by 400.
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
# A wall-clock date-time without an offset (`2026-01-31T09:00`) on a real calendar date.
LOCAL_DATE_TIME: Final = f"^{_DATE}T{_TIME}$"

# -- Formats: text in a language of its own, which only its parser can check ----------------

# A cron expression (`recoup.timekeeping.cron.validate_cron`): its syntax could be a pattern,
# but not that a range ascends or that a day falls in some month ("30 2" never does).
CRON_FORMAT: Final = "cron"
# A dunning policy as TOML (`recoup.dunning.policy.parse_policy`).
POLICY_FORMAT: Final = "dunning-policy-toml"

# -- List cursors: `{created_at µs}:{id}` of the last item of the previous page --------------

CURSOR: Final = CURSOR_PATTERN
RUN_CURSOR: Final = RUN_CURSOR_PATTERN  # a run log's: the last attempt of the previous page

__all__ = [
    "CRON_FORMAT",
    "CURSOR",
    "HEADER_NAME",
    "HEADER_VALUE",
    "HTTP_URL",
    "INSTANT",
    "LOCAL_DATE_TIME",
    "NO_NUL",
    "NO_NUL_OR_AT",
    "POLICY_FORMAT",
    "PRINTABLE",
    "PRINTABLE_NO_AT",
    "RESERVED_HEADER",
    "RUN_CURSOR",
]
