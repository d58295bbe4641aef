"""The headers of a customer email around its rendered words, composed into the bytes an SMTP
server takes (`mime.py`): sender, recipient and reply-to checked as one ASCII mailbox each, a
Message-ID the same at every try, RFC 8058's one-click unsubscribe for reminders.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import format_datetime, formataddr, parseaddr
from typing import TYPE_CHECKING

from recoup.errors import InvalidInput
from recoup.messages.mime import Composed, compose_mime
from recoup.timekeeping.instants import require_aware

if TYPE_CHECKING:
    from recoup.messages.rendering import RenderedMessage


def message_id_for(key: str, sender: str) -> str:
    """`<{key}@{sender's domain}>`: the Message-ID of the email keyed `key`, the same at every
    try, so a resend after a crash is recognisably the same message."""
    return f"<{key}@{_domain(sender)}>"


@functools.lru_cache(maxsize=4096)
def _domain(sender: str) -> str:
    """The domain of `sender`'s address (cached: one parse per sender, not per email)."""
    return parseaddr(sender)[1].rpartition("@")[2] or "recoup.invalid"


def compose(
    rendered: RenderedMessage,
    *,
    to: str,
    sender: str,
    reply_to: str | None,
    message_id: str,
    list_unsubscribe: str | None,
    date: datetime,
    extra_headers: Sequence[tuple[str, str]] = (),
) -> Composed:
    """A multipart/alternative email (text, then HTML) with the caller's `message_id` (given
    with or without its angle brackets), ready for SMTP (`messages.mime`). `list_unsubscribe`
    (an https URL) adds `List-Unsubscribe` and RFC 8058's one-click `List-Unsubscribe-Post`;
    without it neither. `extra_headers` (ASCII names and values) come last, as given."""
    require_aware("date", date)
    to_header, recipient = _address("to", to)
    from_header, envelope_sender = _address("sender", sender)
    mid = message_id if message_id.startswith("<") else f"<{message_id}>"
    headers = [("Subject", rendered.subject), ("From", from_header), ("To", to_header)]
    if reply_to:
        headers.append(("Reply-To", _address("reply_to", reply_to)[0]))
    headers += [
        ("Date", format_datetime(date.astimezone(UTC))),
        ("Message-ID", mid),
        # RFC 3834: an automatic message, so auto-responders do not answer it.
        ("Auto-Submitted", "auto-generated"),
    ]
    if list_unsubscribe:
        url = list_unsubscribe.strip("<>")
        headers += [
            ("List-Unsubscribe", f"<{url}>"),
            ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
        ]
    for name, value in [*headers, *extra_headers]:
        if any(c in value for c in "\r\n"):
            raise InvalidInput(name.lower(), value, "expected a header value on one line")
    return compose_mime(
        [*headers, *extra_headers],
        text=rendered.text,
        html=rendered.html,
        sender=envelope_sender,
        recipient=recipient,
        message_id=mid,
    )


@functools.lru_cache(maxsize=4096)
def _address(field: str, value: str) -> tuple[str, str]:
    """The header form of one mailbox (its name quoted, or in RFC 2047 words when not ASCII)
    and its bare address; `InvalidInput(field, …)` for anything but one ASCII address. Cached:
    a tenant's sender is the same in every email, and the address parser is slow Python."""
    name, addr = parseaddr(value)
    if "@" not in addr or not addr.isascii() or any(c in value for c in "\r\n"):
        raise InvalidInput(
            field, value, 'expected an address such as "Acme <billing@acme.example>"'
        )
    return formataddr((name, addr), charset="utf-8"), addr


__all__ = ["compose", "message_id_for"]
