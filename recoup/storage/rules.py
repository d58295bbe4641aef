"""The store's rules, stated once for every backend: argument checks (the page limit, the
non-empty prefix), which conflict an insert hit, pages and counts, what a completion does to a
job, and how a lost lease is rescued. Each backend keeps its own SQL, connections and instant
codec; these take the already-decoded values (or a connection that can
`execute(query, params).fetchone()`, as both sqlite3 and psycopg connections can), or are
expanded into both dialects' SQL (`SQL_EXPANSIONS`).

The rescue of lost leases (`JobStore.rescue_expired`) is one statement shape per dialect:
select the running jobs whose lease expired (oldest lease first, at most `limit`), log a
`lost` run for each (its attempt; started at the attempt's start, finished now; error
`lost_error(worker)`), and schedule each again now, one attempt more if the lost one was its
last, up to `ATTEMPTS_CEILING` (a job lost on that attempt fails). PostgreSQL runs it as one
statement (`rescue_expired` in its queries.sql), SQLite as three under its write lock
(`expired_leases`, `log_lost_attempts`, `rescue_jobs`); the error text and the ceiling come
from here into both. A dead worker's jobs are handed back by the same rule, selected by the
worker instead of by lease expiry, with the error `lost_session_error(worker)`
(`hand_back_jobs` in each dialect)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from recoup.errors import Conflict, InvalidInput
from recoup.jobs.model import MAX_ATTEMPTS, Completion, Job, JobState, NewJob, RunOutcome
from recoup.jobs.schedules.model import NewSchedule
from recoup.jobs.store import MAX_PAGE, JobPage, latest_per_job
from recoup.storage import row_decoding
from recoup.storage.job_rows import DecodeInstant, encode_cursor

# The schema's ceiling on max_attempts (CHECK max_attempts BETWEEN 1 AND 100, as `BackoffPolicy`
# validates it): the most attempts a rescue may grant a job whose workers keep vanishing.
ATTEMPTS_CEILING = MAX_ATTEMPTS
LOST_ERROR = "lease expired: worker {worker} stopped heartbeating"
LOST_SESSION_ERROR = "worker {worker} is gone: its session ended"


class _Cursor(Protocol):
    def fetchone(self) -> Any: ...


class Executes(Protocol):
    """A connection, as far as `insert_conflict` needs one."""

    def execute(self, query: Any, params: Any = ..., /) -> _Cursor: ...


def job_holding_key(
    conn: Executes, queries: Mapping[str, str], job: NewJob, instant: DecodeInstant
) -> Job:
    """For a job whose insert inserted nothing: the job already holding its idempotency key (the
    same request made again, answered with the job it made), else raise its `Conflict`
    (`insert_conflict`). Uses the backend's `get_job_by_idempotency_key` query, inside the
    insert's transaction."""
    if job.idempotency_key is not None:
        found = conn.execute(
            queries["get_job_by_idempotency_key"],
            {"tenant": job.tenant, "key": job.idempotency_key},
        ).fetchone()
        if found is not None:
            return row_decoding.job_from_row(found, instant)
    raise insert_conflict(conn, queries, job)


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
    """`InvalidInput` naming `limit` outside 1–`MAX_PAGE` (every listing: jobs, invoices)."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("limit", limit, f"expected 1–{MAX_PAGE}")


def check_name_prefix(prefix: str) -> None:
    """`InvalidInput` naming `prefix` for an empty one (`cancel_by_prefix` would cancel every
    named job of the tenant)."""
    if not prefix:
        raise InvalidInput("prefix", prefix, "expected a non-empty name prefix")


def claimed_jobs(rows: Iterable[Sequence[Any]], instant: DecodeInstant) -> list[Job]:
    """The jobs a claim returned, in the order they fire (run_at, then id)."""
    jobs = [row_decoding.job_from_row(row, instant) for row in rows]
    jobs.sort(key=lambda job: (job.run_at, job.id))
    return jobs


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


# Completions


def outcome_is_retry(outcome: RunOutcome) -> bool:
    return outcome in (RunOutcome.RETRY, RunOutcome.LOST)


FINAL_STATE_OF = {
    RunOutcome.SUCCEEDED: JobState.SUCCEEDED,
    RunOutcome.FAILED: JobState.FAILED,
    RunOutcome.CANCELLED: JobState.CANCELLED,
    # RETRY and LOST schedule another attempt; if attempts are spent they fail.
    RunOutcome.RETRY: JobState.FAILED,
    RunOutcome.LOST: JobState.FAILED,
}


# The states in which a job has ended and reports it (`recoup.jobs.callbacks`): a cancelled
# job reports nothing.
ENDED = frozenset({JobState.SUCCEEDED.value, JobState.FAILED.value})


def latest_completions(completions: Sequence[Completion]) -> list[Completion]:
    """The completions a batch applies: one per job, its latest attempt
    (`recoup.jobs.store.latest_per_job`)."""
    return latest_per_job(completions, lambda c: (c.run.job_id, c.run.attempt))


# Lost leases


def lost_error(worker: str) -> str:
    """The error of a run lost with its worker's lease (and the job's `last_error`)."""
    return LOST_ERROR.format(worker=worker)


def lost_session_error(worker: str) -> str:
    """The error of a run handed back with its dead worker's session."""
    return LOST_SESSION_ERROR.format(worker=worker)


def lost_error_sql(worker_column: str, text: str = LOST_ERROR) -> str:
    """`lost_error` (or another text naming `{worker}`) as an SQL expression over a text
    column (the same in both dialects)."""
    before, after = text.split("{worker}")
    return f"{_sql_text(before)} || {worker_column} || {_sql_text(after)}"


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# Placeholders every query file of every backend may use (see `recoup.storage.sql_files`).
SQL_EXPANSIONS = {
    "{lost_error}": lost_error_sql("leased_by"),
    "{lost_session_error}": lost_error_sql("leased_by", LOST_SESSION_ERROR),
    "{attempts_ceiling}": str(ATTEMPTS_CEILING),
}


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
    "ATTEMPTS_CEILING",
    "ENDED",
    "FINAL_STATE_OF",
    "LOST_ERROR",
    "LOST_SESSION_ERROR",
    "MAX_PAGE",
    "SQL_EXPANSIONS",
    "Executes",
    "attempt_keys",
    "check_name_prefix",
    "check_page_limit",
    "check_schedule_jobs",
    "clip",
    "insert_conflict",
    "job_page",
    "latest_completions",
    "lost_error",
    "lost_error_sql",
    "lost_session_error",
    "outcome_is_retry",
    "schedule_conflict",
    "state_counts",
]
