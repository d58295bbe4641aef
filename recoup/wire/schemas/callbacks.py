"""The callback fields of jobs and schedules (`recoup.jobs.callbacks`): where a job's end is
reported. Mixins, so that `JobIn` / `ScheduleIn` and their outputs share one declaration."""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel, Field

from recoup.jobs.callbacks import callback_group
from recoup.jobs.model import HttpTarget, Target
from recoup.wire.schemas.common import OutboundUrl, StrictModel

_CALLBACK = (
    "Receives a POST (JSON, signed like every delivery) once the job has succeeded: its id, "
    "name, schedule id, state, attempts, last status code, error and response excerpt, "
    "finished_at. Checked like the target's URL (the SSRF guard too)."
)
_FAILURE_CALLBACK = (
    "Receives the same report once the job has failed for good (after its last attempt; "
    "never per retried attempt, never when it is cancelled)."
)


class CallbacksIn(StrictModel):
    callback: OutboundUrl | None = Field(
        default=None, min_length=1, max_length=2048, description=_CALLBACK
    )
    failure_callback: OutboundUrl | None = Field(
        default=None, min_length=1, max_length=2048, description=_FAILURE_CALLBACK
    )

    def with_callbacks(self, target: HttpTarget) -> HttpTarget:
        """`target` reporting the job's end to the URLs given."""
        if self.callback is None and self.failure_callback is None:
            return target
        return replace(target, callback=self.callback, failure_callback=self.failure_callback)


class CallbacksOut(BaseModel):
    # Defaults, so that the client still reads records of a server from before callbacks.
    callback: str | None = None
    failure_callback: str | None = None

    @staticmethod
    def callbacks_of(target: Target) -> dict[str, str | None]:
        if not isinstance(target, HttpTarget):
            return {}
        return {"callback": target.callback, "failure_callback": target.failure_callback}


class JobCallbacksOut(CallbacksOut):
    callbacks_group: str | None = Field(
        default=None,
        description=(
            "The group of the jobs that report this job's end (GET /v1/jobs?group=…); null "
            "when it has no callback."
        ),
    )

    @staticmethod
    def job_callbacks_of(job_id: str, target: Target) -> dict[str, str | None]:
        found = CallbacksOut.callbacks_of(target)
        if found.get("callback") or found.get("failure_callback"):
            found["callbacks_group"] = callback_group(job_id)
        return found


__all__ = ["CallbacksIn", "CallbacksOut", "JobCallbacksOut"]
