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

Errors raise `ApiError` subclasses carrying the RFC 9457 problem details:

    ApiError(RecoupError)
    ├── Unauthorized         401
    ├── NotFoundError        404
    ├── ConflictError        409
    ├── Unprocessable        422 (and the other 4xx: `InvalidRequest`)
    ├── ServerError          5xx, after the retries
    └── TransportFailure     no HTTP answer (timeouts, refused connections), after the retries
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
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from recoup.api.schemas import (
    CancelledOut,
    JobOut,
    JobPageOut,
    RunOut,
    RunsOut,
    ScheduleListOut,
    ScheduleOut,
    UpcomingOut,
)
from recoup.client_dunning import DunningCalls
from recoup.errors import Conflict, NotFound, RecoupError

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


@dataclass(frozen=True)
class FieldProblem:
    field: str
    message: str
    value: Any = None


class ApiError(RecoupError):
    """An error answer of the API (or no answer at all: `status` is then None)."""

    def __init__(
        self,
        status: int | None,
        detail: str,
        *,
        type: str = "about:blank",
        title: str = "",
        errors: list[FieldProblem] | None = None,
        problem: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status}: {detail}" if status else detail)
        self.status = status
        self.detail = detail
        self.type = type
        self.title = title
        self.errors = errors or []
        self.problem = dict(problem or {})

    @property
    def fields(self) -> list[str]:
        return [e.field for e in self.errors]


class Unauthorized(ApiError):
    http_status = 401


class NotFoundError(ApiError, NotFound):
    """404 from the server: also a `recoup.errors.NotFound`, so code written against the
    in-process API catches it unchanged."""

    http_status = 404


class ConflictError(ApiError, Conflict):
    """409 from the server: also a `recoup.errors.Conflict`."""

    http_status = 409


class InvalidRequest(ApiError):
    http_status = 400


class Unprocessable(InvalidRequest):
    http_status = 422


class ServerError(ApiError):
    http_status = 500


class TransportFailure(ApiError):
    http_status = 503


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    404: NotFoundError,
    409: ConflictError,
    422: Unprocessable,
}


def _error_of(response: httpx.Response) -> ApiError:
    problem: dict[str, Any] = {}
    try:
        parsed = response.json()
        if isinstance(parsed, dict):
            problem = parsed
    except ValueError:
        pass
    status = response.status_code
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else InvalidRequest)
    errors = [
        FieldProblem(str(e.get("field", "")), str(e.get("message", "")), e.get("value"))
        for e in problem.get("errors") or []
        if isinstance(e, dict)
    ]
    return cls(
        status,
        str(problem.get("detail") or response.reason_phrase or "error"),
        type=str(problem.get("type", "about:blank")),
        title=str(problem.get("title", "")),
        errors=errors,
        problem=problem,
    )


@dataclass
class Client(DunningCalls):
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
        run_at: datetime | None = None,
        delay_seconds: float | None = None,
        method: str = "POST",
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        name: str | None = None,
        group: str | None = None,
        retry: Mapping[str, float] | None = None,
        timeout_seconds: float | None = None,
        idempotency_key: str | None = None,
    ) -> JobOut:
        """Schedule a one-off job at `run_at` or after `delay_seconds` (exactly one)."""
        payload: dict[str, Any] = {"target": _target(url, method, headers, body)}
        if run_at is not None:
            payload["run_at"] = run_at.isoformat()
        if delay_seconds is not None:
            payload["delay_seconds"] = delay_seconds
        _put(payload, name=name, group=group, retry=dict(retry) if retry else None)
        _put(payload, timeout_seconds=timeout_seconds)
        return self._post(JobOut, "/v1/jobs", payload, idempotency_key)

    def get_job(self, job_id: str) -> JobOut:
        return self._get(JobOut, f"/v1/jobs/{_seg(job_id)}")

    def list_jobs(
        self,
        *,
        state: str | None = None,
        name: str | None = None,
        name_prefix: str | None = None,
        group: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JobPageOut:
        """A page of jobs, newest first; `name` and `group` match exactly."""
        params = {
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
    ) -> Iterator[JobOut]:
        """Every job matching, page after page."""
        cursor: str | None = None
        while True:
            page = self.list_jobs(
                state=state, name_prefix=name_prefix, group=group, limit=page_size, cursor=cursor
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
            page = self._get(RunsOut, f"/v1/jobs/{_seg(job_id)}/runs", params)
            found.extend(page.runs)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    def cancel_job(self, job_id: str) -> JobOut:
        """Cancel a job (idempotent: a job that already ended comes back as it is)."""
        return JobOut.model_validate(self._send("DELETE", f"/v1/jobs/{_seg(job_id)}").json())

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
        _put(payload, name=name, name_prefix=name_prefix, group=group)
        return self._post(CancelledOut, "/v1/jobs/cancel", payload, idempotency_key).cancelled

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
    ) -> ScheduleOut:
        """A recurring schedule: `cron` with `timezone`, or `anchor` ({local, timezone, every,
        interval, end_of_month})."""
        payload: dict[str, Any] = {"target": _target(url, method, headers, body)}
        _put(payload, cron=cron, timezone=timezone, anchor=dict(anchor) if anchor else None)
        _put(payload, name=name, retry=dict(retry) if retry else None, missed=missed)
        _put(payload, timeout_seconds=timeout_seconds)
        return self._post(ScheduleOut, "/v1/schedules", payload, idempotency_key)

    def get_schedule(self, schedule_id: str) -> ScheduleOut:
        return self._get(ScheduleOut, f"/v1/schedules/{_seg(schedule_id)}")

    def list_schedules(
        self, *, state: str | None = None, name: str | None = None
    ) -> list[ScheduleOut]:
        """The tenant's schedules by name (every page); `state` is active or paused."""
        found: list[ScheduleOut] = []
        cursor: str | None = None
        while True:
            params = {"state": state, "name": name, "limit": MAX_PAGE_SIZE, "cursor": cursor}
            page = self._get(ScheduleListOut, "/v1/schedules", params)
            found.extend(page.schedules)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    def delete_schedule(self, schedule_id: str) -> None:
        self._send("DELETE", f"/v1/schedules/{_seg(schedule_id)}")

    def pause_schedule(
        self, schedule_id: str, *, idempotency_key: str | None = None
    ) -> ScheduleOut:
        path = f"/v1/schedules/{_seg(schedule_id)}/pause"
        return self._post(ScheduleOut, path, None, idempotency_key)

    def resume_schedule(
        self, schedule_id: str, *, idempotency_key: str | None = None
    ) -> ScheduleOut:
        path = f"/v1/schedules/{_seg(schedule_id)}/resume"
        return self._post(ScheduleOut, path, None, idempotency_key)

    def upcoming(self, schedule_id: str, count: int = 5) -> list[datetime]:
        path = f"/v1/schedules/{_seg(schedule_id)}/upcoming"
        return self._get(UpcomingOut, path, {"count": count}).upcoming

    # Operations

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
            raise _error_of(response)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _pause(self, attempt: int, retry_after: str | None) -> None:
        delay = min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt) * (0.5 + self._rng.random() / 2)
        if retry_after is not None:
            try:
                delay = min(BACKOFF_CAP, max(delay, float(retry_after)))
            except ValueError:
                pass  # an HTTP-date: the backoff will do
        time.sleep(delay)


def _target(url: str, method: str, headers: Mapping[str, str] | None, body: Any) -> dict[str, Any]:
    target: dict[str, Any] = {"url": url, "method": method}
    if headers:
        target["headers"] = dict(headers)
    if body is not None:
        target["body"] = body
    return target


def _put(payload: dict[str, Any], **values: Any) -> None:
    """Set the fields that were given (absent fields take the server's defaults)."""
    payload.update({k: v for k, v in values.items() if v is not None})


def _seg(value: str) -> str:
    """An id as one path segment (an id with a '/' must not reach another route)."""
    return quote(value, safe="")
