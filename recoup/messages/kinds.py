"""The kinds of customer email (the table is in the package docstring).

`MessageKind` is defined by the policy that chooses among the kinds
(`recoup.dunning.policy_messages`, below this package); this is its name for the messages
service. `REMINDER_KINDS` may be opted out of (List-Unsubscribe); the others are required
notices and are sent whatever the customer's preference."""

from __future__ import annotations

from recoup.dunning.policy_messages import REMINDER_KINDS, MessageKind

REQUIRED_KINDS: frozenset[MessageKind] = frozenset(MessageKind) - REMINDER_KINDS

__all__ = ["REMINDER_KINDS", "REQUIRED_KINDS", "MessageKind"]
