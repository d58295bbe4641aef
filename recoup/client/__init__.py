"""A typed Python client for Recoup's HTTP API.

    from recoup.client import Client

    with Client("http://127.0.0.1:8080", token="rcp_…") as api:
        job = api.create_job("https://example.com/hook", delay_seconds=60, name="invoice-42")
        for run in api.runs(job.id):
            print(run.attempt, run.status_code)

Every POST carries an `Idempotency-Key` (a fresh UUID4 unless you pass one), and a request
that times out, cannot connect, or gets a 5xx is retried with the *same* key, a bounded number
of times with exponential backoff and jitter, so a retried POST never creates a second job.
A 409 "key in use" (the first try is still being processed) is waited out the same way.

Errors raise `ApiError` subclasses carrying the RFC 9457 problem details, their message the
problem's `detail` (`recoup.client.errors` draws the hierarchy). Instants are aware datetimes
or RFC 3339 text, as the API takes them; a naive datetime is a `ValueError` naming the field.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from recoup.client.changes import ChangeCalls, metadata_params
from recoup.client.dunning import DunningCalls
from recoup.client.errors import (
    ApiError,
    ConflictError,
    FieldProblem,
    InvalidRequest,
    NotFoundError,
    ServerError,
    TransportFailure,
    Unauthorized,
    Unprocessable,
    error_of,
)
from recoup.client.shapes import instant, put, seg, target
from recoup.wire.schemas import (
    CancelledOut,
    JobOut,
    JobPageOut,
    RunOut,
    RunsOut,
    ScheduleListOut,
    ScheduleOut,
    UpcomingOut,
)
from recoup.wire.schemas.common import TenantOut
from recoup.wire.schemas.redrive import RedriveOut

__all__ = [
    "ApiError",
    "Client",
    "ConflictError",
    "FieldProblem",
    "InvalidRequest",
    "NotFoundError",
    "ServerError",
    "TransportFailure",
    "Unauthorized",
    "Unprocessable",
]

DEFAULT_TIMEOUT = 10.0  # seconds per try
DEFAULT_RETRIES = 4  # tries after the first
BACKOFF_BASE = 0.25  # seconds; doubled each try
BACKOFF_CAP = 8.0  # seconds; also the longest Retry-After honoured
MAX_PAGE_SIZE = 1000  # records per page: the API's bound on `limit`, for reads of every page

M = TypeVar("M", bound=BaseModel)


@dataclass
class Client(DunningCalls, ChangeCalls):
    """A client of one Recoup server for one tenant (its bearer `token`)."""

    base_url: str
    token: str
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    transport: httpx.BaseTransport | None = None
    _http: httpx.Client = field(init=False, repr=False)
    _rng: random.Random = field(init=False, repr=False, default_factory=random.Random)

    def __post_init__(self) -> None:
        self._http = httpx.Client(
            base_url=self.base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {self.token}", "User-Agent": "recoup-client"},
            timeout=self.timeout,
            transport=self.transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # Jobs

    def create_job(
        self,
        url: str,
        *,
        run_at: datetime | str | None = None,
        delay_seconds: float | None = None,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        name: str | None = None,
        group: str | None = None,
        retry: Mapping[str, float] | None = None,
        timeout_seconds: float | None = None,
        idempotency_key: str | None = None,
        allow_past: bool = False,
        callback: str | None = None,
        failure_callback: str | None = None,
        metadata: Mapping[str, str] | None = None,
        job_key: str | None = None,
    ) -> JobOut:
        """Schedule a one-off job at `run_at` (an aware datetime or RFC 3339 text) or after
        `delay_seconds` (exactly one). A `run_at` more than 5 minutes past is refused unless
        `allow_past` (the job then runs at once). Its end is reported to `callback`
        (succeeded) or `failure_callback` (failed for good). `metadata` is yours
        (`list_jobs` filters by it). `job_key` is the job's own idempotency key (the body's
        `idempotency_key`): every delivery carries it, and a second job with it is not made
        (the first is returned). `idempotency_key` is the request's, for its retries."""
        payload: dict[str, Any] = {"target": target(url, method, headers, body)}
        if run_at is not None:
            payload["run_at"] = instant("run_at", run_at)
        if allow_past:
            payload["allow_past"] = True
        if delay_seconds is not None:
            payload["delay_seconds"] = delay_seconds
        put(payload, name=name, group=group, retry=dict(retry) if retry else None)
        put(payload, timeout_seconds=timeout_seconds, metadata=_dict(metadata))
        put(payload, callback=callback, failure_callback=failure_callback)
        put(payload, idempotency_key=job_key)
        return self._post(JobOut, "/v1/jobs", payload, idempotency_key)

    def get_job(self, job_id: str) -> JobOut:
        return self._get(JobOut, f"/v1/jobs/{seg(job_id)}")

    def list_jobs(
        self,
        *,
        state: str | None = None,
        name: str | None = None,
        name_prefix: str | None = None,
        group: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> JobPageOut:
        """A page of jobs, newest first; `name` and `group` match exactly; every pair of
        `metadata` must be in a job's."""
        params = {
            **metadata_params(metadata),
            "state": state,
            "name": name,
            "name_prefix": name_prefix,
            "group": group,
            "limit": limit,
            "cursor": cursor,
        }
        return self._get(JobPageOut, "/v1/jobs", params)

    def iter_jobs(
        self,
        *,
        state: str | None = None,
        name_prefix: str | None = None,
        group: str | None = None,
        page_size: int = 100,
        metadata: Mapping[str, str] | None = None,
    ) -> Iterator[JobOut]:
        """Every job matching, page after page."""
        cursor: str | None = None
        while True:
            page = self.list_jobs(
                state=state,
                name_prefix=name_prefix,
                group=group,
                limit=page_size,
                cursor=cursor,
                metadata=metadata,
            )
            yield from page.jobs
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def runs(self, job_id: str) -> list[RunOut]:
        """The job's whole run log, first attempt first (every page)."""
        found: list[RunOut] = []
        cursor: str | None = None
        while True:
            params = {"limit": MAX_PAGE_SIZE, "cursor": cursor}
            page = self._get(RunsOut, f"/v1/jobs/{seg(job_id)}/runs", params)
            found.extend(page.runs)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    def list_runs(
        self, job_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> RunsOut:
        """A page of the job's run log, first attempt first."""
        params = {"limit": limit, "cursor": cursor}
        return self._get(RunsOut, f"/v1/jobs/{seg(job_id)}/runs", params)

    def cancel_job(self, job_id: str) -> JobOut:
        """Cancel a job (idempotent: a job that already ended comes back as it is)."""
        return JobOut.model_validate(self._send("DELETE", f"/v1/jobs/{seg(job_id)}").json())

    def retry_job(self, job_id: str, *, idempotency_key: str | None = None) -> JobOut:
        """Redrive a job that failed for good: scheduled again now with a fresh budget of
        attempts (409 `ApiError` unless it failed)."""
        return self._post(JobOut, f"/v1/jobs/{seg(job_id)}/retry", None, idempotency_key)

    def cancel_jobs(
        self,
        *,
        name: str | None = None,
        name_prefix: str | None = None,
        group: str | None = None,
        idempotency_key: str | None = None,
    ) -> int:
        """Cancel the live job named `name`, all whose names start with `name_prefix`, or
        all of exactly `group` (give one of the three)."""
        payload: dict[str, Any] = {}
        put(payload, name=name, name_prefix=name_prefix, group=group)
        return self._post(CancelledOut, "/v1/jobs/cancel", payload, idempotency_key).cancelled

    def redrive_jobs(
        self,
        *,
        group: str | None = None,
        name_prefix: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        error: str | None = None,
        dry_run: bool = False,
        idempotency_key: str | None = None,
    ) -> RedriveOut:
        """Redrive the failed jobs the filter names (each given field must match; none: every
        failed job), or with `dry_run` only count them."""
        payload: dict[str, Any] = {"dry_run": dry_run}
        put(payload, group=group, name_prefix=name_prefix, error=error)
        if since is not None:
            payload["since"] = instant("since", since)
        if until is not None:
            payload["until"] = instant("until", until)
        return self._post(RedriveOut, "/v1/jobs/redrive", payload, idempotency_key)

    # Schedules

    def create_schedule(
        self,
        url: str,
        *,
        cron: str | None = None,
        timezone: str | None = None,
        anchor: Mapping[str, Any] | None = None,
        name: str | None = None,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        retry: Mapping[str, float] | None = None,
        timeout_seconds: float | None = None,
        missed: str | None = None,
        idempotency_key: str | None = None,
        metadata: Mapping[str, str] | None = None,
        start_at: datetime | str | None = None,
        end_at: datetime | str | None = None,
    ) -> ScheduleOut:
        """A recurring schedule: `cron` with `timezone`, or `anchor` ({local, timezone, every,
        interval, end_of_month}); no occurrence before `start_at` nor after `end_at`;
        `metadata` is copied onto every job it fires."""
        payload: dict[str, Any] = {"target": target(url, method, headers, body)}
        put(payload, cron=cron, timezone=timezone, anchor=dict(anchor) if anchor else None)
        put(payload, name=name, retry=dict(retry) if retry else None, missed=missed)
        put(payload, timeout_seconds=timeout_seconds, metadata=_dict(metadata))
        if start_at is not None:
            payload["start_at"] = instant("start_at", start_at)
        if end_at is not None:
            payload["end_at"] = instant("end_at", end_at)
        return self._post(ScheduleOut, "/v1/schedules", payload, idempotency_key)

    def get_schedule(self, schedule_id: str) -> ScheduleOut:
        return self._get(ScheduleOut, f"/v1/schedules/{seg(schedule_id)}")

    def list_schedules(
        self,
        *,
        state: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> list[ScheduleOut]:
        """The tenant's schedules by name (every page); `state` is active, paused or ended."""
        found: list[ScheduleOut] = []
        cursor: str | None = None
        while True:
            page = self.schedules_page(
                state=state, name=name, metadata=metadata, limit=MAX_PAGE_SIZE, cursor=cursor
            )
            found.extend(page.schedules)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    def schedules_page(
        self,
        *,
        state: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ScheduleListOut:
        """A page of the tenant's schedules by name."""
        params = {"state": state, "name": name, "limit": limit, "cursor": cursor}
        params.update(metadata_params(metadata))
        return self._get(ScheduleListOut, "/v1/schedules", params)

    def delete_schedule(self, schedule_id: str) -> None:
        self._send("DELETE", f"/v1/schedules/{seg(schedule_id)}")

    def pause_schedule(
        self, schedule_id: str, *, idempotency_key: str | None = None
    ) -> ScheduleOut:
        path = f"/v1/schedules/{seg(schedule_id)}/pause"
        return self._post(ScheduleOut, path, None, idempotency_key)

    def resume_schedule(
        self, schedule_id: str, *, idempotency_key: str | None = None
    ) -> ScheduleOut:
        path = f"/v1/schedules/{seg(schedule_id)}/resume"
        return self._post(ScheduleOut, path, None, idempotency_key)

    def upcoming(self, schedule_id: str, count: int = 5) -> list[datetime]:
        path = f"/v1/schedules/{seg(schedule_id)}/upcoming"
        return self._get(UpcomingOut, path, {"count": count}).upcoming

    # Operations

    def tenant(self) -> str:
        """The tenant the token acts for."""
        return self._get(TenantOut, "/v1/tenant").id

    def ready(self) -> bool:
        """Whether the server answers and reaches its database."""
        try:
            return self._http.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    # Transport

    def _get(self, model: type[M], path: str, params: Mapping[str, Any] | None = None) -> M:
        return model.model_validate(self._send("GET", path, params=params).json())

    def _post(self, model: type[M], path: str, payload: Any, idempotency_key: str | None) -> M:
        # One key for every try of this call: that is what makes the retries safe.
        key = idempotency_key or str(uuid.uuid4())
        response = self._send("POST", path, json=payload, headers={"Idempotency-Key": key})
        return model.model_validate(response.json())

    def _put_json(self, model: type[M], path: str, payload: Any) -> M:
        return model.model_validate(self._send("PUT", path, json=payload).json())

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """The successful response; retries what is worth retrying, raises the rest."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self._http.request(
                    method, path, params=query, json=json, headers=dict(headers or {})
                )
            except httpx.TransportError as exc:  # timeouts and connection errors
                if last:
                    raise TransportFailure(None, f"{method} {path}: {exc!r}") from exc
                self._pause(attempt, None)
                continue
            if response.is_success:
                return response
            retryable = response.status_code >= 500 or (
                response.status_code == 409 and "key-in-use" in response.text
            )
            if retryable and not last:
                self._pause(attempt, response.headers.get("Retry-After"))
                continue
            raise error_of(response)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _pause(self, attempt: int, retry_after: str | None) -> None:
        delay = min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt) * (0.5 + self._rng.random() / 2)
        if retry_after is not None:
            try:
                delay = min(BACKOFF_CAP, max(delay, float(retry_after)))
            except ValueError:
                pass  # an HTTP-date: the backoff will do
        time.sleep(delay)


# The errors live in `recoup.client.errors`, but `recoup.client` is where users import them
# from: their reprs, tracebacks and pickles name it (as httpx does for its own split modules).
for _name in __all__:
    globals()[_name].__module__ = __name__


def _dict(value: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if value is None else dict(value)
