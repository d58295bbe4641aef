"""Bulk redrive of dead letters: which failed jobs a filter names (a tenant's jobs, by group,
name prefix, the time they failed and their last error), checked as it is made, and the audit
line every redrive writes (who, when, the filter, how many). The API (`POST /v1/jobs/redrive`),
`recoup jobs redrive` and the dashboard count first (`dry_run`), then redrive
(`Scheduler.redrive_failed`); each redriven job is scheduled again now with the budget of
attempts it was created with (`JobStore.redrive`).

Filters are exact: `group` by equality, `name_prefix` and `error` literally (no wildcard:
`%` and `_` are plain characters; `error` is a substring of the job's last error, case
sensitive), the time range on the instant it failed, `since` inclusive and `until` exclusive.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from recoup.errors import InvalidInput
from recoup.timekeeping.instants import to_utc

TEXT_MAX: Final = 200  # characters of a group, name prefix or error filter
REDRIVE_BATCH: Final = 500  # jobs redriven per transaction
audit_log = logging.getLogger("recoup.audit")


@dataclass(frozen=True, kw_only=True)
class FailedFilter:
    """Failed jobs of `tenant` matching every field given (None: any)."""

    tenant: str
    group: str | None = None
    name_prefix: str | None = None
    since: datetime | None = None  # failed at or after
    until: datetime | None = None  # failed before
    error: str | None = None  # a substring of the last error

    def __post_init__(self) -> None:
        for name in ("group", "name_prefix", "error"):
            value = getattr(self, name)
            if value is not None and not 1 <= len(value) <= TEXT_MAX:
                raise InvalidInput(name, value, f"expected 1–{TEXT_MAX} characters")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, to_utc(name, value))
        if self.since is not None and self.until is not None and self.until <= self.since:
            raise InvalidInput("until", self.until.isoformat(), "expected later than since")

    def as_json(self) -> dict[str, Any]:
        """The filter as the audit line and the API's answer show it (given fields only)."""
        found: dict[str, Any] = {"tenant": self.tenant}
        for name in ("group", "name_prefix", "error"):
            if getattr(self, name) is not None:
                found[name] = getattr(self, name)
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                found[name] = value.isoformat()
        return found


@dataclass(frozen=True, kw_only=True)
class Redrive:
    """What a redrive did: `matched` failed jobs, `redriven` of them scheduled again (fewer
    when one had spent the ceiling of attempts or a live job holds its name); a dry run
    redrives none."""

    matched: int
    redriven: int
    dry_run: bool


def audit(who: str, at: datetime, found: FailedFilter, outcome: Redrive) -> None:
    """The audit line of one redrive (or count), on the `recoup.audit` logger."""
    audit_log.info(
        "redrive %s",
        json.dumps(
            {
                "who": who,
                "at": at.isoformat(),
                "filter": found.as_json(),
                "dry_run": outcome.dry_run,
                "matched": outcome.matched,
                "redriven": outcome.redriven,
            },
            sort_keys=True,
        ),
    )


__all__ = ["REDRIVE_BATCH", "FailedFilter", "Redrive", "audit"]
