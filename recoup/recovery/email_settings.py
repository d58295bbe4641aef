"""A tenant's email settings: its SMTP server (the URL, with its password, stored sealed:
`recoup.sealed`), the sender and reply address, the update-card link template, its own
templates and whether reminders may be opted out of. Emails go out once an SMTP URL and a
sender are set.

A change is validated whole before anything is stored (`settled`, then `save`); the SMTP URL
is never returned, printed or put in an error but without its password.

| setting           | accepted                                                          |
|-------------------|-------------------------------------------------------------------|
| smtp_url          | smtp://[user:pass@]host[:port][?starttls=…] or smtps://…          |
|                   | (`recoup.messages.channel.parse_smtp_url`)                        |
| email_from        | one address, with or without a display name:                      |
| reply_to          | `Acme Billing <billing@acme.example>`, `billing@acme.example`     |
| update_card_url   | an https URL (http only on a loopback host) containing `{token}`  |
| templates_dir     | an existing directory (its files override the shipped templates)  |
| allow_unsubscribe | true: reminders carry `List-Unsubscribe` (required notices never) |
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.utils import formataddr, getaddresses, parseaddr
from pathlib import Path
from urllib.parse import urlsplit

from recoup.errors import InvalidInput
from recoup.messages.channel import SmtpServer, parse_smtp_url, redact_smtp_url
from recoup.recovery.contacts import EMAIL_PATTERN
from recoup.recovery.email_store import MessageSettings, MessageStore
from recoup.recovery.records import Keep, given_or_kept
from recoup.sealed import Box

MAX_ADDRESS = 320  # characters, as the schema's CHECK

# The forms the settings accept, stated as patterns in the OpenAPI document (recoup.wire) and
# enforced here first, so that what a client generated from the document sends is accepted
# and nothing outside them is: a display name without the characters that would split or
# quote an address; an SMTP URL whose user and password are unreserved or percent-encoded; an
# update-card URL whose only braces are the token's.
_DISPLAY_CHAR = r'[^\s<>"(),:;@\[\]\\\x00-\x1f\x7f]'
_DISPLAY = rf"{_DISPLAY_CHAR}(?:[^<>\"(),:;@\[\]\\\x00-\x1f\x7f]{{0,60}}{_DISPLAY_CHAR})?"
_QUOTED = r'"[^"\\\x00-\x1f\x7f]{1,62}"'  # a quoted name may hold commas: "Acme, Inc."
ADDRESS_PATTERN = rf"^(?:(?:{_DISPLAY}|{_QUOTED}) <{EMAIL_PATTERN[1:-1]}>|{EMAIL_PATTERN[1:-1]})$"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"{_LABEL}(?:\.{_LABEL})*"
_PORT = "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
_USER_CHAR = r"(?:[A-Za-z0-9._~-]|%[0-9A-Fa-f]{2})"
_USER = rf"{_USER_CHAR}+(?::{_USER_CHAR}*)?@"
_SERVER = rf"(?:{_USER})?{_HOST}(?::{_PORT})?/?"
SMTP_URL_PATTERN = (
    rf"^(?:smtp://{_SERVER}(?:\?starttls=(?:auto|require|never))?|smtps://{_SERVER})$"
)
_PATH = r"(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*"
UPDATE_CARD_URL_PATTERN = (
    rf"^(?:https://{_HOST}|http://(?:127\.0\.0\.1|localhost))(?::{_PORT})?/{_PATH}"
    rf"\{{token\}}{_PATH}$"
)
_ADDRESS = re.compile(ADDRESS_PATTERN)
_SMTP_URL = re.compile(SMTP_URL_PATTERN)
_UPDATE_CARD_URL = re.compile(UPDATE_CARD_URL_PATTERN)
TOKEN = "{token}"
_LOOPBACK_NAMES = ("localhost",)


def check_address(value: str, field: str) -> str:
    """`value` as one mailbox (`Name <local@domain>` or `local@domain`), normalised; else
    `InvalidInput(field, …)`."""
    allowed = 'expected one email address, such as "Acme Billing <billing@acme.example>"'
    if not 3 <= len(value) <= MAX_ADDRESS or not _ADDRESS.fullmatch(value):
        raise InvalidInput(field, value, allowed)
    found = getaddresses([value])
    if len(found) != 1:
        raise InvalidInput(field, value, allowed)
    name, addr = found[0]
    local, at, domain = addr.rpartition("@")
    if not at or not local or not domain or " " in addr:
        raise InvalidInput(field, value, allowed)
    if "." not in domain and domain not in _LOOPBACK_NAMES:
        raise InvalidInput(field, value, allowed + " (a domain with a dot)")
    try:
        Address(display_name=name, addr_spec=addr)
    except (ValueError, IndexError, HeaderParseError):
        raise InvalidInput(field, value, allowed) from None
    return formataddr((name, addr)) if name else addr


def check_update_card_url(value: str, field: str = "update_card_url") -> str:
    allowed = (
        "expected an https URL containing {token}, such as "
        "https://app.example/billing/update?token={token} (http only on a loopback host)"
    )
    if len(value) > 2048 or not _UPDATE_CARD_URL.fullmatch(value):
        raise InvalidInput(field, value, allowed)
    try:
        parts = urlsplit(value.replace(TOKEN, "t"))
        host = parts.hostname
    except ValueError:
        raise InvalidInput(field, value, allowed) from None
    if host is None or parts.scheme not in ("https", "http"):
        raise InvalidInput(field, value, allowed)
    if parts.scheme == "http" and not _is_loopback(host):
        raise InvalidInput(field, value, allowed)
    return value


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_smtp_url(value: str, field: str = "smtp_url") -> SmtpServer:
    """The server of an SMTP URL in one of the forms the document states; `InvalidInput`
    (never showing the password) for anything else."""
    server = parse_smtp_url(value, field)
    if not _SMTP_URL.fullmatch(value):
        raise InvalidInput(
            field,
            redact_smtp_url(value),
            "expected smtp://[user:password@]host[:port][?starttls=auto|require|never] or "
            "smtps://[user:password@]host[:port], the user and password percent-encoded",
        )
    return server


def check_templates_dir(value: str, field: str = "templates_dir") -> str:
    allowed = "expected an existing directory of email templates"
    if not value.isprintable():
        raise InvalidInput(field, value, allowed)
    try:
        path = Path(value).expanduser()  # `~nobody`: RuntimeError
        found = path.is_dir()
    except (RuntimeError, OSError, ValueError):
        found = False
    if not found:
        raise InvalidInput(field, value, allowed)
    return str(path.resolve())


def sender_domain(email_from: str) -> str:
    """The domain of the sender's address (the right side of every Message-ID)."""
    return parseaddr(email_from)[1].rpartition("@")[2].lower()


_SERVERS_KEPT = 256  # tenants' opened SMTP URLs kept by one process


class EmailSettings:
    def __init__(self, store: MessageStore, box: Box, *, now: Callable[[], datetime]):
        self.store = store
        self.box = box
        self._now = now
        # Sealed URL → its server: opening the seal (Fernet) for every email adds up.
        self._servers: dict[str, SmtpServer] = {}

    def settings(self, tenant: str) -> MessageSettings:
        """The tenant's settings (none stored: no SMTP, no sender)."""
        found = self.store.get_message_settings(tenant)
        return found or MessageSettings(
            tenant=tenant,
            smtp_url=None,
            email_from=None,
            reply_to=None,
            update_card_url=None,
            templates_dir=None,
            allow_unsubscribe=False,
            updated_at=self._now(),
        )

    def settled(
        self,
        tenant: str,
        *,
        smtp_url: str | Keep | None,
        email_from: str | Keep | None,
        reply_to: str | Keep | None,
        update_card_url: str | Keep | None,
        templates_dir: str | Keep | None,
        allow_unsubscribe: bool | Keep,
    ) -> MessageSettings:
        """The settings `save` stores (validated; the SMTP URL sealed; nothing written). Each
        setting given replaces the stored one (None clears it); `KEEP` leaves it."""
        current = self.settings(tenant)
        sealed = current.smtp_url
        if isinstance(smtp_url, str):
            check_smtp_url(smtp_url)
            sealed = self.box.seal(smtp_url)
        elif smtp_url is None:
            sealed = None
        wanted = replace(
            current,
            smtp_url=sealed,
            email_from=_checked(email_from, current.email_from, "email_from", check_address),
            reply_to=_checked(reply_to, current.reply_to, "reply_to", check_address),
            update_card_url=_checked(
                update_card_url,
                current.update_card_url,
                "update_card_url",
                check_update_card_url,
            ),
            templates_dir=_checked(
                templates_dir, current.templates_dir, "templates_dir", check_templates_dir
            ),
            allow_unsubscribe=given_or_kept(allow_unsubscribe, current.allow_unsubscribe),
            updated_at=self._now(),
        )
        if wanted.smtp_url is not None and wanted.email_from is None:
            raise InvalidInput(
                "email_from",
                None,
                'expected the sender with an SMTP server, such as "Acme Billing'
                ' <billing@acme.example>"',
            )
        return wanted

    def save(self, settings: MessageSettings) -> MessageSettings:
        return self.store.put_message_settings(settings)

    def server(self, settings: MessageSettings) -> SmtpServer | None:
        """The tenant's SMTP server, its URL opened (only the sending process does)."""
        if settings.smtp_url is None:
            return None
        found = self._servers.get(settings.smtp_url)
        if found is None:
            if len(self._servers) >= _SERVERS_KEPT:
                self._servers.clear()
            found = self._servers[settings.smtp_url] = parse_smtp_url(
                self.box.open(settings.smtp_url)
            )
        return found

    def shown_smtp_url(self, settings: MessageSettings) -> str | None:
        """The SMTP URL without its password (for `recoup tenants configure`'s answer)."""
        if settings.smtp_url is None:
            return None
        return redact_smtp_url(self.box.open(settings.smtp_url))

    def reseal(self) -> int:
        """Seal every stored SMTP URL again with the box's current key; returns how many."""
        count = 0
        for found in self.store.list_message_settings():
            if found.smtp_url is None:
                continue
            self.store.put_message_settings(
                replace(found, smtp_url=self.box.reseal(found.smtp_url))
            )
            count += 1
        return count


def _checked(
    given: str | Keep | None, stored: str | None, field: str, check: Callable[[str, str], str]
) -> str | None:
    if isinstance(given, Keep):
        return stored
    return None if given is None else check(given, field)


__all__ = [
    "EmailSettings",
    "check_address",
    "check_templates_dir",
    "check_update_card_url",
    "sender_domain",
]
