"""POST /v1/jobs/redrive: the failed jobs of the tenant a filter names (`recoup.jobs.redrive`),
counted with `dry_run`, then redriven."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from recoup.jobs.redrive import TEXT_MAX, FailedFilter, Redrive
from recoup.wire.schemas.common import Flag, Instant, StrictModel, Text


class RedriveIn(StrictModel):
    """Every field given must match (none: every failed job of the tenant). `name_prefix` and
    `error` are taken literally (`error`: a case-sensitive substring of the last error); the
    time range is on the instant a job failed, `since` inclusive, `until` exclusive."""

    group: Text | None = Field(default=None, min_length=1, max_length=TEXT_MAX)
    name_prefix: Text | None = Field(default=None, min_length=1, max_length=TEXT_MAX)
    since: Instant | None = Field(default=None, description="RFC 3339, with an offset.")
    until: Instant | None = Field(default=None, description="RFC 3339, with an offset.")
    error: Text | None = Field(default=None, min_length=1, max_length=TEXT_MAX)
    dry_run: Flag = Field(default=False, description="Count the jobs, redrive none.")

    def filter_for(self, tenant: str) -> FailedFilter:
        return FailedFilter(
            tenant=tenant,
            group=self.group,
            name_prefix=self.name_prefix,
            since=self.since,
            until=self.until,
            error=self.error,
        )


class RedriveOut(BaseModel):
    """`matched` failed jobs; `redriven` of them scheduled again (none on a dry run; fewer than
    matched when one has spent the ceiling of attempts or a live job holds its name)."""

    matched: int
    redriven: int
    dry_run: bool
    filter: dict[str, Any]

    @classmethod
    def of(cls, outcome: Redrive, found: FailedFilter) -> RedriveOut:
        return cls(
            matched=outcome.matched,
            redriven=outcome.redriven,
            dry_run=outcome.dry_run,
            filter=found.as_json(),
        )


__all__ = ["RedriveIn", "RedriveOut"]
