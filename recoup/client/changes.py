"""The PATCH calls of the Python client (`recoup.client.Client`): changing a job that has not
started and a schedule, and the `metadata[key]=value` filter of the lists.

Only the arguments given are sent; `KEEP` (the default) leaves a field as it is, and None,
where the API allows it, clears it (a job's `name`, a schedule's `start_at` / `end_at`; in
`metadata`, a key set to None is removed).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any, Final, Literal

from recoup.client.shapes import instant, seg
from recoup.client.transport import M, Transport
from recoup.wire.schemas import JobOut, ScheduleOut


class _Keep(Enum):
    KEEP = "keep"


KEEP: Final = _Keep.KEEP  # an argument not given: the field is left as it is


def metadata_params(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """A metadata filter as the lists' query parameters (`metadata[key]=value`)."""
    return {f"metadata[{key}]": value for key, value in (metadata or {}).items()}


class ChangeCalls(Transport):
    """`update_job` and `update_schedule`. A PATCH is retried as every call is (a 5xx, no
    answer): each of its fields gives the same result when applied twice, but
    `delay_seconds`, counted from when each try arrives; send `run_at` where that matters."""

    def update_job(
        self,
        job_id: str,
        *,
        run_at: datetime | str | _Keep = KEEP,
        delay_seconds: float | _Keep = KEEP,
        target: Mapping[str, Any] | _Keep = KEEP,
        name: str | _Keep | None = KEEP,
        retry: Mapping[str, float] | _Keep = KEEP,
        timeout_seconds: float | _Keep = KEEP,
        metadata: Mapping[str, str | None] | _Keep = KEEP,
        allow_past: bool = False,
    ) -> JobOut:
        """Change a job that has not started (`ConflictError`, 409, once it has: its state is
        in the message). `target` is the whole target ({url, method, headers, body});
        `metadata` merges (a key set to None is removed); a `run_at` more than 5 minutes past
        needs `allow_past`, as `create_job`'s."""
        payload = _given(
            run_at=run_at if isinstance(run_at, _Keep) else instant("run_at", run_at),
            delay_seconds=delay_seconds,
            target=target,
            name=name,
            retry=retry,
            timeout_seconds=timeout_seconds,
            metadata=metadata,
            allow_past=True if allow_past else KEEP,
        )
        return self._patch(JobOut, f"/v1/jobs/{seg(job_id)}", payload)

    def update_schedule(
        self,
        schedule_id: str,
        *,
        cron: str | _Keep = KEEP,
        timezone: str | _Keep = KEEP,
        anchor: Mapping[str, Any] | _Keep = KEEP,
        name: str | _Keep = KEEP,
        target: Mapping[str, Any] | _Keep = KEEP,
        retry: Mapping[str, float] | _Keep = KEEP,
        timeout_seconds: float | _Keep = KEEP,
        missed: Literal["skip", "run_once", "run_all"] | _Keep = KEEP,
        paused: bool | _Keep = KEEP,
        metadata: Mapping[str, str | None] | _Keep = KEEP,
        start_at: datetime | _Keep | None = KEEP,
        end_at: datetime | _Keep | None = KEEP,
    ) -> ScheduleOut:
        """Change a schedule: its next occurrence is computed again and the jobs it had
        materialised ahead are replaced. `end_at` in the past ends it."""
        payload = _given(
            cron=cron,
            timezone=timezone,
            anchor=anchor,
            name=name,
            target=target,
            retry=retry,
            timeout_seconds=timeout_seconds,
            missed=missed,
            paused=paused,
            metadata=metadata,
            start_at=_instant_or("start_at", start_at),
            end_at=_instant_or("end_at", end_at),
        )
        return self._patch(ScheduleOut, f"/v1/schedules/{seg(schedule_id)}", payload)

    def _patch(self, model: type[M], path: str, payload: dict[str, Any]) -> M:
        return model.model_validate(self._send("PATCH", path, json=payload).json())


def _given(**values: Any) -> dict[str, Any]:
    return {
        key: dict(value) if isinstance(value, Mapping) else value
        for key, value in values.items()
        if value is not KEEP
    }


def _instant_or(field: str, value: datetime | str | _Keep | None) -> str | _Keep | None:
    return value if value is None or isinstance(value, _Keep) else instant(field, value)


__all__ = ["KEEP", "ChangeCalls", "metadata_params"]
