"""The `[access]` table of a dunning policy: how long a customer in dunning keeps full use of
what they pay for.

    [access]
    grace_days = 7      # days after the failure in `grace`; then `restricted` until it ends

The default, 7 days, covers the first two retries of the shipped presets (the next business
day and three business days later, about a week), when most failed payments that recover by
themselves do, so an app does not lock a customer out over a decline their bank fixes
overnight; the later retries then run restricted, which gives the customer a reason to update
the card before the final action (`recoup.dunning.access`). 0: restricted from the failure.
Pure: an error is a `ConfigError` naming the dotted field (`access.grace_days`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from recoup.dunning import policy_fields as fields

DEFAULT_GRACE_DAYS = 7
MAX_GRACE_DAYS = 366  # a policy's longest dunning (`limits.max_duration_days`) is a year too


@dataclass(frozen=True, kw_only=True)
class AccessPolicy:
    grace_days: int = DEFAULT_GRACE_DAYS

    @property
    def grace(self) -> timedelta:
        return timedelta(days=self.grace_days)


_KEYS = frozenset({"grace_days"})


def access_from_dict(data: dict[str, Any]) -> AccessPolicy:
    """The `[access]` table of a policy document (`data` is the whole document); the defaults
    when the table is absent."""
    table = fields.table(data, "access", _KEYS)
    grace_days = fields.integer(
        "access.grace_days", table.get("grace_days", DEFAULT_GRACE_DAYS), 0, MAX_GRACE_DAYS
    )
    return AccessPolicy(grace_days=grace_days)


__all__ = ["DEFAULT_GRACE_DAYS", "MAX_GRACE_DAYS", "AccessPolicy", "access_from_dict"]
