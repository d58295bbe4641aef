"""The `flow` object of a job or a schedule (`recoup.jobs.flow`): a key with a rate and/or a
parallelism, held across every worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, Field

from recoup.jobs.flow import (
    DEFAULT_FLOW_PERIOD,
    MAX_FLOW_PARALLELISM,
    MAX_FLOW_PERIOD,
    MAX_FLOW_RATE,
    FlowLimits,
)
from recoup.jobs.model import Job
from recoup.wire.schemas.common import Integer, Number, StrictModel, Text
from recoup.wire.schemas.stated import Stated


def _at_least_one(most: int) -> Stated:
    """The bounds in JSON Schema's words: inside a union, pydantic leaves an integer's
    constraints as its own `ge`/`le`, which no JSON Schema reader knows."""
    return Stated(minimum=1, maximum=most, ge=None, le=None)


class FlowIn(StrictModel):
    """Flow control: the tenant's jobs with this `key` start at most `rate` times per
    `period_seconds` and/or run at most `parallelism` at once, across every worker (one of
    the two at least). Jobs held back wait, scheduled, and start as soon as the key allows, in
    due order."""

    key: Text = Field(min_length=1, max_length=200)
    rate: Annotated[Integer, Field(ge=1, le=MAX_FLOW_RATE), _at_least_one(MAX_FLOW_RATE)] | None = (
        None
    )
    period_seconds: Number = Field(
        default=DEFAULT_FLOW_PERIOD.total_seconds(),
        # A millisecond at the least: a shorter period rounds to nothing as a duration.
        ge=0.001,
        le=MAX_FLOW_PERIOD.total_seconds(),
        description="The period of `rate` (a millisecond at the least).",
    )
    parallelism: (
        Annotated[
            Integer, Field(ge=1, le=MAX_FLOW_PARALLELISM), _at_least_one(MAX_FLOW_PARALLELISM)
        ]
        | None
    ) = None

    def limits(self) -> FlowLimits:
        """As one value (a schedule's); `InvalidInput` without a rate or a parallelism."""
        return FlowLimits(
            key=self.key,
            rate=self.rate,
            period=timedelta(seconds=self.period_seconds),
            parallelism=self.parallelism,
        )

    def job_fields(self) -> dict[str, Any]:
        """The `NewJob` keywords (checked there: a rate or a parallelism is required)."""
        return {
            "flow_key": self.key,
            "flow_rate": self.rate,
            "flow_period": timedelta(seconds=self.period_seconds),
            "flow_parallelism": self.parallelism,
        }


def flow_fields(
    flow: FlowIn | None, ordering_key: str | None = None, on_failure: str = "hold"
) -> dict[str, Any]:
    """The `NewJob` keywords of a body's `flow`, `ordering_key` and `ordering_on_failure`: a
    `flow` under the ordering key itself gives its rate to the ordered jobs."""
    found = {} if flow is None else flow.job_fields()
    if ordering_key is not None:
        found["ordering_key"] = ordering_key
        found["ordering_skip_failed"] = on_failure == "skip"
        if found.get("flow_key") == ordering_key:
            del found["flow_key"]
    return found


class FlowOut(BaseModel):
    key: str
    rate: int | None
    period_seconds: float
    parallelism: int | None

    @classmethod
    def of_limits(cls, limits: FlowLimits | None) -> FlowOut | None:
        if limits is None:
            return None
        return cls(
            key=limits.key,
            rate=limits.rate,
            period_seconds=limits.period.total_seconds(),
            parallelism=limits.parallelism,
        )

    @classmethod
    def of(cls, job: Job) -> FlowOut | None:
        if job.flow_key is None and (job.ordering_key is None or job.flow_rate is None):
            return None
        return cls(
            key=job.flow_key or job.ordering_key or "",
            rate=job.flow_rate,
            period_seconds=job.flow_period.total_seconds(),
            parallelism=job.flow_parallelism,
        )
