"""A customer's contact details as Recoup accepts them: an email address, a display name and
a locale, each checked and written one way (`InvalidInput` naming the field otherwise).

The address rule is RFC 5322's dot-atom at an RFC 1123 host name with at least one dot: what
mailbox providers hand out. Quoted local parts, domain literals (`a@[192.0.2.1]`) and
internationalised addresses are refused: an SMTP relay without SMTPUTF8 refuses them too, and
a customer's address is never on a bare host name. `EMAIL_PATTERN` and `LOCALE_PATTERN` are the
rules as the API's document states them.
"""

from __future__ import annotations

import re

from recoup.errors import InvalidInput

MAX_EMAIL = 254  # RFC 5321's path limit less the angle brackets
MAX_NAME = 200
EMAIL_ALLOWED = "expected one email address such as ada@example.com (no display name)"
NAME_ALLOWED = f"expected 1–{MAX_NAME} characters, no control characters"
LOCALE_ALLOWED = (
    "expected a language with an optional script and region, BCP 47 or babel style: "
    "en, en_US, de-DE, pt_BR, zh_Hant_TW"
)
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
EMAIL_PATTERN = rf"^{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+$"
# language (ISO 639, 2–3 letters), an optional script (ISO 15924) and region (ISO 3166 or a
# UN M.49 number), separated by `-` (BCP 47) or `_` (babel, POSIX).
LOCALE_PATTERN = r"^([A-Za-z]{2,3})(?:[-_]([A-Za-z]{4}))?(?:[-_]([A-Za-z]{2}|[0-9]{3}))?$"
# A name goes into a `To:` header: no control characters (a CR or LF would start a header).
NAME_PATTERN = r"^[^\x00-\x1f\x7f]+$"
_EMAIL = re.compile(EMAIL_PATTERN)
_NAME = re.compile(NAME_PATTERN)
_LOCALE = re.compile(LOCALE_PATTERN)


def email_address(value: str, field: str = "customer_email") -> str:
    """The address `value` with its domain in lower case (the local part is the recipient
    server's to interpret, so it is kept as given)."""
    if len(value) > MAX_EMAIL or _EMAIL.fullmatch(value) is None:
        raise InvalidInput(field, value, EMAIL_ALLOWED)
    local, _, domain = value.rpartition("@")
    return f"{local}@{domain.lower()}"


def same_address(a: str | None, b: str | None) -> bool:
    """Two addresses name one mailbox, as Recoup compares them (case aside)."""
    return a is not None and b is not None and a.lower() == b.lower()


def display_name(value: str, field: str = "customer_name") -> str:
    """A customer's name as given."""
    if len(value) > MAX_NAME or _NAME.fullmatch(value) is None:
        raise InvalidInput(field, value, NAME_ALLOWED)
    return value


def locale_tag(value: str, field: str = "locale") -> str:
    """`value` written babel's way, the way the message templates read it: `de-DE`,
    `de_de` and `de_DE` are all `de_DE`; `zh-hant-tw` is `zh_Hant_TW`; `EN` is `en`."""
    match = _LOCALE.fullmatch(value)
    if match is None:
        raise InvalidInput(field, value, LOCALE_ALLOWED)
    language, script, region = match.groups()
    parts = [language.lower()]
    if script:
        parts.append(script.title())
    if region:
        parts.append(region.upper())
    return "_".join(parts)


__all__ = [
    "EMAIL_ALLOWED",
    "EMAIL_PATTERN",
    "LOCALE_ALLOWED",
    "LOCALE_PATTERN",
    "MAX_EMAIL",
    "MAX_NAME",
    "NAME_ALLOWED",
    "NAME_PATTERN",
    "display_name",
    "email_address",
    "locale_tag",
    "same_address",
]
