"""The `flow` object of a job or a schedule (`recoup.jobs.flow`): a key with a rate and/or a
parallelism, held across every worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field

from recoup.jobs.flow import (
    DEFAULT_FLOW_PERIOD,
    MAX_FLOW_PARALLELISM,
    MAX_FLOW_PERIOD,
    MAX_FLOW_RATE,
)
from recoup.jobs.model import Job
from recoup.wire.schemas.common import Integer, Number, StrictModel, Text


class FlowIn(StrictModel):
    """Flow control: the tenant's jobs with this `key` start at most `rate` times per
    `period_seconds` and/or run at most `parallelism` at once, across every worker (one of
    the two at least). Jobs held back wait, scheduled, and start as soon as the key allows, in
    due order."""

    key: Text = Field(min_length=1, max_length=200)
    rate: Integer | None = Field(default=None, ge=1, le=MAX_FLOW_RATE)
    period_seconds: Number = Field(
        default=DEFAULT_FLOW_PERIOD.total_seconds(),
        gt=0,
        le=MAX_FLOW_PERIOD.total_seconds(),
        description="The period of `rate`.",
    )
    parallelism: Integer | None = Field(default=None, ge=1, le=MAX_FLOW_PARALLELISM)

    def job_fields(self) -> dict[str, Any]:
        """The `NewJob` keywords (checked there: a rate or a parallelism is required)."""
        return {
            "flow_key": self.key,
            "flow_rate": self.rate,
            "flow_period": timedelta(seconds=self.period_seconds),
            "flow_parallelism": self.parallelism,
        }


def flow_fields(flow: FlowIn | None) -> dict[str, Any]:
    return {} if flow is None else flow.job_fields()


class FlowOut(BaseModel):
    key: str
    rate: int | None
    period_seconds: float
    parallelism: int | None

    @classmethod
    def of(cls, job: Job) -> FlowOut | None:
        if job.flow_key is None:
            return None
        return cls(
            key=job.flow_key,
            rate=job.flow_rate,
            period_seconds=job.flow_period.total_seconds(),
            parallelism=job.flow_parallelism,
        )
