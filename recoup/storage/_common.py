"""Store logic that is the same on every backend: which conflict an insert hit, argument checks,
pages and counts. Each backend keeps its own SQL, connections and instant codec; these take the
already-decoded values (or a connection that can `execute(query, params).fetchone()`, as both
sqlite3 and psycopg connections can)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from recoup.errors import Conflict, InvalidInput
from recoup.jobs.model import Job, JobState, NewJob
from recoup.jobs.schedule_model import NewSchedule
from recoup.jobs.store import JobPage
from recoup.storage._rows import encode_cursor

MAX_PAGE = 1000  # jobs per `list_jobs` page


class _Cursor(Protocol):
    def fetchone(self) -> Any: ...


class Executes(Protocol):
    """A connection, as far as `insert_conflict` needs one."""

    def execute(self, query: Any, params: Any = ..., /) -> _Cursor: ...


def insert_conflict(conn: Executes, queries: Mapping[str, str], job: NewJob) -> Conflict:
    """The `Conflict` to raise for a job whose insert inserted nothing (and whose idempotency
    key, if any, matched no job): a live job holds its name, its id is taken, or its schedule
    already has an occurrence at its run_at. Uses the backend's `get_live_job_by_name` and
    `get_job_any_tenant` queries, inside the insert's transaction."""
    if job.name is not None:
        live = conn.execute(
            queries["get_live_job_by_name"], {"tenant": job.tenant, "name": job.name}
        ).fetchone()
        if live is not None:
            return Conflict(f"a live job of tenant {job.tenant!r} is named {job.name!r}")
    if conn.execute(queries["get_job_any_tenant"], {"id": job.id}).fetchone() is not None:
        return Conflict(f"a job with id {job.id!r} exists")
    return Conflict(f"schedule {job.schedule_id!r} already has a job at {job.run_at}")


def schedule_conflict(schedule: NewSchedule) -> Conflict:
    """The `Conflict` of a schedule whose insert inserted nothing."""
    return Conflict(
        f"tenant {schedule.tenant!r} already has a schedule named {schedule.name!r}"
        f" (or the id {schedule.id!r} is taken)"
    )


def check_schedule_jobs(schedule_id: str, jobs: Sequence[NewJob]) -> None:
    """`InvalidInput` unless every job belongs to the schedule `advance_schedule` advances."""
    for job in jobs:
        if job.schedule_id != schedule_id:
            raise InvalidInput(
                "jobs.schedule_id", job.schedule_id, f"expected the schedule's id {schedule_id!r}"
            )


def check_page_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("limit", limit, f"expected 1–{MAX_PAGE}")


def job_page(
    rows: Sequence[Sequence[Any]], limit: int, decode: Callable[[Sequence[Any]], Job]
) -> JobPage:
    """A page from the rows of a `list_jobs` query run with `limit + 1` (the extra row, never
    returned, says that a next page exists)."""
    jobs = [decode(row) for row in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = jobs[-1]
        next_cursor = encode_cursor(last.created_at, last.id)
    return JobPage(jobs=jobs, next_cursor=next_cursor)


def state_counts(rows: Iterable[Sequence[Any]]) -> dict[JobState, int]:
    """Every state, zero included, from `(state, count)` rows."""
    counts = dict.fromkeys(JobState, 0)
    for state, count in rows:
        counts[JobState(state)] = count
    return counts


def clip(text: str | None, limit: int) -> str | None:
    """`text` cut to `limit` characters (the run log's columns are bounded)."""
    return None if text is None else text[:limit]


def attempt_keys(job_ids: Sequence[str], attempts: Sequence[int] | None) -> list[str] | None:
    """'id:attempt' per held attempt, as the heartbeat query matches them (None: any)."""
    if attempts is None:
        return None
    if len(attempts) != len(job_ids):
        raise InvalidInput("attempts", len(attempts), f"expected one per job id ({len(job_ids)})")
    return [f"{job_id}:{attempt}" for job_id, attempt in zip(job_ids, attempts, strict=True)]


__all__ = [
    "MAX_PAGE",
    "Executes",
    "attempt_keys",
    "check_page_limit",
    "check_schedule_jobs",
    "clip",
    "insert_conflict",
    "job_page",
    "schedule_conflict",
    "state_counts",
]
