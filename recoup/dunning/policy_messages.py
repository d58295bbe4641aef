"""The `[messages]` table of a dunning policy: which customer emails a tenant sends, and when.

    [messages]
    enabled = true                  # false: no email at all for this policy's invoices
    send = ["payment_failed", "retry_failed", "final_warning",
            "recovered", "exhausted", "card_expiring"]   # the default: every kind
    window_start = "08:00"          # the customer's local daytime: emails wait for it
    window_end = "20:00"            # exclusive; after window_start on the same local day
    card_expiry_days_before = 7     # a card_expiring reminder this many days before renewal
    token_days = 14                 # how long an update-card link stays valid

The kinds are named here, in the domain, because the policy is what chooses among them;
`recoup.messages.kinds` re-exports them for the service that sends them. Pure: no clock, no
files; an error is a `ConfigError` naming the dotted field (`messages.window_start`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import time
from enum import StrEnum
from typing import Any

from recoup.dunning import policy_fields as fields
from recoup.errors import ConfigError


class MessageKind(StrEnum):
    """One email the customer may get; the value is its name in policies, the ledger and
    template file names."""

    PAYMENT_FAILED = "payment_failed"  # the failure that opened dunning
    RETRY_FAILED = "retry_failed"  # a retry failed; the next one is planned
    FINAL_WARNING = "final_warning"  # a retry failed and the next is the last: the final action
    RECOVERED = "recovered"  # paid at last
    EXHAUSTED = "exhausted"  # no attempt left: what happened to access
    CARD_EXPIRING = "card_expiring"  # before a renewal the card on file will not cover

    @property
    def is_reminder(self) -> bool:
        """A reminder a customer may opt out of (List-Unsubscribe); the others are notices
        about money owed or taken, which are always sent."""
        return self in REMINDER_KINDS


# May be opted out of; payment_failed, final_warning, recovered and exhausted are required
# notices (the customer must learn that a payment failed, that access will change, that it did).
REMINDER_KINDS: frozenset[MessageKind] = frozenset(
    {MessageKind.RETRY_FAILED, MessageKind.CARD_EXPIRING}
)

_HH_MM = re.compile(r"[0-2][0-9]:[0-5][0-9]")
_MAX_DAYS_BEFORE = 60  # a renewal further away than this is not "upcoming"
_MAX_TOKEN_DAYS = 90  # a link that lives longer is a standing credential, not a one-tap link


@dataclass(frozen=True, kw_only=True)
class MessagePolicy:
    """Which emails go out and when (see the module docstring for the TOML)."""

    enabled: bool = True
    send: frozenset[MessageKind] = field(default_factory=lambda: frozenset(MessageKind))
    window_start: time = time(8, 0)
    window_end: time = time(20, 0)
    card_expiry_days_before: int = 7
    token_days: int = 14

    def sends(self, kind: MessageKind) -> bool:
        return self.enabled and kind in self.send


_KEYS = frozenset(
    {"enabled", "send", "window_start", "window_end", "card_expiry_days_before", "token_days"}
)


def _clock_time(path: str, value: Any) -> time:
    # ASCII digits only, as the policy's window.start: int() would also read "+8" or "٠٨".
    if isinstance(value, str) and _HH_MM.fullmatch(value):
        try:
            return time(int(value[:2]), int(value[3:]))
        except ValueError:
            pass
    raise ConfigError(path, value, 'expected a local time HH:MM, e.g. "08:00"')


def _kinds(value: Any) -> frozenset[MessageKind]:
    allowed = [k.value for k in MessageKind]
    if not isinstance(value, list):
        raise ConfigError("messages.send", value, f"expected an array of {allowed}")
    kinds: set[MessageKind] = set()
    for i, name in enumerate(value):
        if not isinstance(name, str) or name not in allowed:
            raise ConfigError(f"messages.send[{i}]", name, f"expected one of {allowed}")
        kinds.add(MessageKind(name))
    return frozenset(kinds)


def messages_from_dict(data: dict[str, Any]) -> MessagePolicy:
    """The `[messages]` table of a policy document (`data` is the whole document); the
    defaults when the table is absent."""
    table = fields.table(data, "messages", _KEYS)
    defaults = MessagePolicy()
    start = _clock_time("messages.window_start", table.get("window_start", "08:00"))
    end = _clock_time("messages.window_end", table.get("window_end", "20:00"))
    if end <= start:
        raise ConfigError(
            "messages.window_end",
            table.get("window_end", "20:00"),
            f"expected a local time after window_start ({start:%H:%M}) on the same day",
        )
    return MessagePolicy(
        enabled=fields.boolean("messages.enabled", table.get("enabled", True)),
        send=_kinds(table["send"]) if "send" in table else defaults.send,
        window_start=start,
        window_end=end,
        card_expiry_days_before=fields.integer(
            "messages.card_expiry_days_before",
            table.get("card_expiry_days_before", defaults.card_expiry_days_before),
            1,
            _MAX_DAYS_BEFORE,
        ),
        token_days=fields.integer(
            "messages.token_days", table.get("token_days", defaults.token_days), 1, _MAX_TOKEN_DAYS
        ),
    )


__all__ = ["REMINDER_KINDS", "MessageKind", "MessagePolicy", "messages_from_dict"]
