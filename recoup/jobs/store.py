"""The job store protocol: named operations, one params object or plain arguments each, `now`
passed in. Implemented by `recoup.storage.sqlite` and `recoup.storage.postgres`; one behaviour
suite (`tests/storage/test_store_contract.py`) runs unchanged against both."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from recoup.jobs.changes import JobChange
from recoup.jobs.model import Completion, Job, JobState, NewJob, Run, Tenant
from recoup.jobs.redrive import FailedFilter
from recoup.jobs.schedules.model import NewSchedule, Schedule
from recoup.jobs.worker_records import RegisteredWorker, SessionRules, WorkerInfo, WorkerSession

# The largest page a list operation returns (jobs, invoices), 1–MAX_PAGE: the stores refuse a
# larger `limit` and the HTTP API declares the same bound on its `limit` parameters.
MAX_PAGE = 1000  # records per page


@dataclass(frozen=True, kw_only=True)
class ClaimParams:
    worker_id: str
    now: datetime
    horizon: timedelta  # claim jobs due up to now + horizon (fired from memory at run_at)
    lease: timedelta  # lease runs from max(now, run_at)
    limit: int
    # `now` is a wall-clock reading (not virtual time): what is due and the leases are then
    # decided by the store's own clock (the database's, which every worker shares), so a
    # worker whose clock is wrong neither claims early nor misses what is due
    # (ARCHITECTURE.md, 'Clock skew').
    store_clock: bool = False
    # Jobs this worker claimed and hands back unstarted, in the claim's own transaction
    # before it claims: rate-limited jobs whose start came too late after their slot
    # (`recoup.jobs.flow`), which this claim may then reserve a new slot. A give-back of its
    # own would be one more write transaction per late start, and on SQLite every write
    # transaction of one process makes the other processes' writers wait.
    give_back: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class JobFilter:
    tenant: str
    state: JobState | None = None
    name: str | None = None  # exact equality
    name_prefix: str | None = None
    schedule_id: str | None = None
    group: str | None = None  # exact equality, never a prefix
    # Every pair must be in the job's metadata (`recoup.jobs.metadata.check_filter`).
    metadata: dict[str, str] | None = None
    limit: int = 50  # 1–MAX_PAGE
    cursor: str | None = None  # opaque; from the previous page


@dataclass(frozen=True, kw_only=True)
class JobUpdate:
    """What `update_scheduled_job` found: the job (None if absent) and whether the change was
    applied (False: the job had started or ended, and is returned as it is)."""

    job: Job | None
    changed: bool


@dataclass(frozen=True, kw_only=True)
class JobPage:
    jobs: list[Job]
    next_cursor: str | None


@dataclass(frozen=True, kw_only=True)
class RunFilter:
    """A page of one job's run log, first attempt first."""

    tenant: str
    job_id: str
    limit: int = 50  # 1–MAX_PAGE
    cursor: str | None = None  # opaque; from the previous page


@dataclass(frozen=True, kw_only=True)
class RunPage:
    runs: list[Run]
    next_cursor: str | None


@dataclass(frozen=True, kw_only=True)
class ScheduleFilter:
    """A page of the tenant's live (not deleted) schedules, by name."""

    tenant: str
    paused: bool | None = None  # None: paused and active alike
    ended: bool | None = None  # True: no occurrence left (next_fire_at is None)
    name: str | None = None  # exact equality
    metadata: dict[str, str] | None = None  # every pair must be in the schedule's metadata
    limit: int = 50  # 1–MAX_PAGE
    cursor: str | None = None  # opaque; from the previous page


@dataclass(frozen=True, kw_only=True)
class SchedulePage:
    schedules: list[Schedule]
    next_cursor: str | None


@dataclass(frozen=True, kw_only=True)
class PruneResult:
    jobs: int
    runs: int


class JobStore(Protocol):
    """Durable jobs and their run log. Every transition is a compare-and-set: an operation
    that finds the job in another state than it expects changes nothing and says so."""

    def migrate(self) -> int:
        """Apply pending migrations; return the schema version now in force."""
        ...

    def close(self) -> None: ...

    # Tenants (the worker needs each tenant's signing secret)
    def ensure_tenant(self, tenant: Tenant) -> Tenant: ...
    def get_tenant(self, tenant_id: str) -> Tenant | None: ...

    # Writing jobs
    def insert(self, job: NewJob, *, now: datetime) -> Job:
        """Insert one job. A live job of the tenant with the same name → `Conflict`. A job of
        the tenant with the same idempotency key → that job, unchanged."""
        ...

    def insert_many(self, jobs: Sequence[NewJob], *, now: datetime) -> int:
        """Bulk insert; rows that clash on a live name or an idempotency key are skipped.
        Returns how many were inserted."""
        ...

    # The worker's side
    def claim_due(self, params: ClaimParams) -> list[Job]: ...
    def complete_many(self, completions: Sequence[Completion], *, now: datetime) -> list[str]:
        """Apply each completion by compare-and-set and log its run; return the ids applied.
        A completion's `callback` is inserted in the same transaction if the job ended with
        it (succeeded, or failed for good), skipped if its idempotency key is taken.

        RETRY moves the job back to scheduled at `retry_at` (now if None), or to failed when its
        attempts are spent (the run is then logged as FAILED). A completion for a job cancelled
        during that attempt changes nothing but logs the run as CANCELLED; any other refused
        completion (stale lease, other worker, other attempt) changes and logs nothing. Of
        two completions of one job in a batch, only the later attempt is considered."""
        ...

    def heartbeat(
        self,
        worker_id: str,
        job_ids: Sequence[str],
        *,
        lease_until: datetime | None = None,
        lease_for: timedelta | None = None,
        attempts: Sequence[int] | None = None,
    ) -> list[str]:
        """Extend the leases still held by `worker_id`, to `lease_until` (an instant of the
        caller's clock) or `lease_for` past the store's own clock (a worker on the wall clock:
        its lease then never lapses early however wrong its clock); exactly one of the two.
        Return the ids still held. With
        `attempts` (one per id), a lease is held only while the job is still on that attempt:
        an attempt whose lease lapsed and whose job was claimed again (even by the same worker
        id) is not extended, and its id not returned."""
        ...

    def release(self, worker_id: str, job_ids: Sequence[str], *, now: datetime) -> int:
        """Give back claimed jobs that never started (graceful shutdown): scheduled again,
        attempt count restored."""
        ...

    def rescue_expired(
        self, *, now: datetime, limit: int = 1000, store_clock: bool = False
    ) -> list[str]:
        """Running jobs whose lease expired: log a `lost` run and schedule them again now.
        With `store_clock` (`now` is a wall-clock reading), expired and now are by the store's
        own clock, as `ClaimParams.store_clock`: a rescuer whose clock runs ahead takes no
        live lease, one behind none late.
        A lost attempt never consumes a job's last attempt (its worker vanished, maybe before
        starting it: a kill -9 must not fail jobs that never ran): a job whose lost attempt
        was its last gets one more (`max_attempts` + 1). Attempt numbers are never reused
        (they fence stale completions and key the run log). The schema's ceiling of 100
        attempts still applies: a job lost on its 100th attempt fails, which bounds a job that
        kills every worker running it. At most `limit` per call."""
        ...

    def read_clock(self) -> datetime:
        """The store's own clock (PostgreSQL's `clock_timestamp()`; SQLite: the machine's,
        which every process on the file shares), against which a worker on the wall clock
        measures its skew."""
        ...

    # Worker sessions (ARCHITECTURE.md, 'Worker sessions')
    def open_worker_session(
        self,
        worker: WorkerInfo,
        *,
        now: datetime,
        rules: SessionRules,
        replacing: bool = False,
    ) -> WorkerSession | None:
        """Register `worker` for as long as the session lives. None while another live session
        holds the id (PostgreSQL: its lock; SQLite: a process seen running, or a heartbeat
        fresher than `rules.dead_after`, or a session of this very process unless
        `replacing`). A dead previous holder's jobs (a restart under the same id) are handed
        back first, as `rescue_dead_workers` does, unless `replacing`: the worker re-opening
        its own lost session keeps the jobs it still runs (or hands them back itself,
        `WorkerSession.hand_back`, if it gave them up)."""
        ...

    def rescue_dead_workers(
        self, *, now: datetime, rules: SessionRules, limit: int = 100
    ) -> dict[str, list[str]]:
        """Find up to `limit` dead workers (`SessionRules`), hand their running jobs back
        (claimed or started: a `lost` run each, scheduled again now, by the rule of
        `rescue_expired`: a lost attempt never spends the last one) and delete their
        registrations. Returns worker id → the job ids handed back."""
        ...

    def workers(self) -> list[RegisteredWorker]:
        """Every registered worker session, oldest first."""
        ...

    def next_due_at(self) -> datetime | None:
        """The earliest run_at of a scheduled job (the worker sleeps until then)."""
        ...

    def due_backlog(self, now: datetime) -> int:
        """How many scheduled jobs (all tenants) have run_at ≤ `now`: work the workers have
        not claimed yet although it is due, a gauge of their lag."""
        ...

    def wait_for_notify(self, timeout: float) -> bool:
        """Block up to `timeout` seconds (real time); True as soon as jobs were inserted (or
        released, or rescued) by anyone, False on timeout. The worker sleeps here until its next
        known due time. PostgreSQL: LISTEN on a dedicated connection; SQLite: at once for this
        process, within a short poll for other processes."""
        ...

    # Cancelling
    def cancel(self, tenant: str, job_id: str, *, now: datetime, begun: bool = True) -> Job | None:
        """Cancel a live job (idempotent: a final job is returned unchanged); None if absent.
        `begun=False` cancels only a job never claimed: one running, or scheduled again after
        an attempt (a retry, a rescue), is left to finish and returned as it is. For work
        whose answer must be heard once it was asked, such as a charge request."""
        ...

    # Dead letters: jobs that failed for good (listed with `JobFilter(state=FAILED)`)
    def redrive(self, tenant: str, job_id: str, *, now: datetime) -> Job | None:
        """Schedule a failed job again now with a fresh budget of attempts (as many again as
        it had, up to the ceiling of 100; its attempt numbers and run log continue) and return
        it. None, changing nothing, for a job that is absent, not failed, has spent the
        ceiling, or whose name a live job holds meanwhile."""
        ...

    def count_failed(self, found: FailedFilter) -> int:
        """How many failed jobs `found` names (`recoup.jobs.redrive`)."""
        ...

    def redrive_failed(self, found: FailedFilter, *, now: datetime) -> tuple[int, int]:
        """Redrive (as `redrive`) every failed job `found` names: (matched, redriven)."""
        ...

    def delete_failed(self, tenant: str, job_id: str) -> bool:
        """Delete a failed job (its run log stays until pruned); False unless it was one."""
        ...

    def cancel_by_name(self, tenant: str, name: str, *, now: datetime) -> int: ...
    def cancel_by_prefix(self, tenant: str, prefix: str, *, now: datetime) -> int:
        """Cancel the live jobs whose name starts with `prefix` (taken literally; an empty
        prefix → `InvalidInput`); return how many."""
        ...

    def cancel_group(self, tenant: str, group: str, *, now: datetime) -> int:
        """Cancel the live jobs of exactly that group (equality, not a prefix: "inv_1" does
        not reach "inv_1-x"); return how many."""
        ...

    # Changing a job that has not started
    def update_scheduled_job(
        self, tenant: str, job_id: str, change: JobChange, *, now: datetime
    ) -> JobUpdate:
        """Apply `change` (`JobChange.applied_to`) if the job is still scheduled and has never
        started, checked and written in one transaction that a claim cannot interleave with:
        a claim either finds the changed job, or makes this find it started and change
        nothing. A new name that a live job of the tenant holds → `Conflict`."""
        ...

    def replace_unstarted_job(
        self, tenant: str, job_id: str, job: NewJob, *, now: datetime
    ) -> JobUpdate:
        """Replace a job still scheduled that never started (not a schedule's occurrence) with
        `job`'s fields, keeping its id, idempotency key and creation (on_conflict "replace"),
        in one transaction a claim cannot interleave with; `changed` False when it had
        started. A new name that a live job of the tenant holds → `Conflict`."""
        ...

    # Reading
    def get(self, tenant: str, job_id: str) -> Job | None: ...
    def get_by_name(self, tenant: str, name: str) -> Job | None:
        """The live job with that name, else the most recent one."""
        ...

    def list_jobs(self, query: JobFilter) -> JobPage: ...
    def runs(self, tenant: str, job_id: str) -> list[Run]:
        """The whole run log of a job, first attempt first."""
        ...

    def list_runs(self, query: RunFilter) -> RunPage:
        """A page of the run log. A limit outside 1–`MAX_PAGE` or a malformed cursor →
        `InvalidInput` naming it."""
        ...

    def count_by_state(self, tenant: str | None = None) -> dict[JobState, int]:
        """Every state's count; reads every job of the tenant (or the table): not for hot
        paths (see `count_live`)."""
        ...

    def count_live(self) -> dict[JobState, int]:
        """The scheduled and running jobs of all tenants, each counted through its partial
        index (finished rows, however many, are never read)."""
        ...

    def count_by_tenant(self) -> dict[str, dict[JobState, int]]:
        """Every tenant's count of jobs in each state it has; reads every job (the metrics
        read it rarely, see `recoup.jobs.metrics`)."""
        ...

    # Retention
    def prune(self, *, now: datetime, keep_runs_for: timedelta, limit: int = 10_000) -> PruneResult:
        """Delete final jobs past their `keep_for`, and runs older than `keep_runs_for`
        (a job deleted at once keeps its run log for that period). At most `limit` jobs and
        `limit` runs per call, each batch in its own short transaction: call again while a
        count equals `limit`."""
        ...


class ScheduleStore(Protocol):
    """Recurring schedules. Materialising an occurrence and advancing the schedule happen in
    one transaction, by compare-and-set on `next_fire_at`, so two schedulers never create the
    same occurrence twice (and the unique (schedule_id, occurrence_at) of jobs, the immutable
    first run_at of a schedule's job, is the backstop)."""

    def insert_schedule(
        self, schedule: NewSchedule, *, next_fire_at: datetime | None, now: datetime
    ) -> Schedule:
        """A schedule of the tenant with the same name (not deleted) → `Conflict`."""
        ...

    def get_schedule(self, tenant: str, schedule_id: str) -> Schedule | None:
        """Deleted schedules too (`deleted=True`): their jobs still name them."""
        ...

    def list_schedules(self, query: ScheduleFilter) -> SchedulePage:
        """A page of live schedules, by name. A limit outside 1–`MAX_PAGE` → `InvalidInput`."""
        ...

    def set_schedule_paused(
        self,
        tenant: str,
        schedule_id: str,
        *,
        paused: bool,
        now: datetime,
        next_fire_at: datetime | None = None,  # on resume: the next occurrence after now
    ) -> Schedule | None: ...
    def delete_schedule(self, tenant: str, schedule_id: str, *, now: datetime) -> bool:
        """Delete the schedule and cancel its live jobs; False if absent."""
        ...

    def due_schedules(self, *, now: datetime, horizon: timedelta, limit: int) -> list[Schedule]:
        """Active schedules whose next_fire_at ≤ now + horizon."""
        ...

    def advance_schedule(
        self,
        schedule_id: str,
        *,
        expected_next: datetime,
        new_next: datetime | None,
        jobs: Sequence[NewJob],
        now: datetime,
        revision: int | None = None,
    ) -> bool:
        """If next_fire_at still equals `expected_next` (and, given `revision`, the schedule's
        revision is still that one): insert `jobs` (skipping any whose occurrence,
        (schedule_id, first run_at), exists) and set next_fire_at = `new_next`.
        False if another scheduler advanced it first, or the schedule was paused, changed or
        deleted meanwhile. Every job's `schedule_id` must be `schedule_id` (else
        `InvalidInput`)."""
        ...

    def replace_schedule(
        self, schedule: Schedule, *, expected_revision: int, now: datetime
    ) -> Schedule | None:
        """Store `schedule`'s definition (name, rule, target, retry, timeout, missed, paused,
        next_fire_at, metadata, window) over the live schedule of its id if its revision is
        still `expected_revision`, bumping the revision; in the same transaction delete the
        jobs it materialised ahead that have not started (occurrences after `now`), which the
        new definition materialises again. None if the revision moved (a concurrent change:
        read again and retry) or the schedule is gone. A name another live schedule of the
        tenant holds → `Conflict`."""
        ...


class SchedulerStore(JobStore, ScheduleStore, Protocol):
    """What a `Scheduler` needs: jobs and schedules in one database (every backend of
    `recoup.storage` is one)."""


_Item = TypeVar("_Item")


def latest_per_job(
    items: Sequence[_Item], job_attempt: Callable[[_Item], tuple[str, int]]
) -> list[_Item]:
    """At most one of `items` per job: the one of its latest attempt (of equal attempts, the
    last one), in the order the jobs first appear. `job_attempt` gives an item's (job id,
    attempt).

    The rule of a batch of completions (`JobStore.complete_many`): an older attempt of a job
    that was claimed again is stale (its compare-and-set would be refused anyway), and a batch
    keyed by job id must not carry two rows for one job."""
    latest: dict[str, tuple[int, _Item]] = {}
    for item in items:
        job_id, attempt = job_attempt(item)
        seen = latest.get(job_id)
        if seen is None or seen[0] <= attempt:
            latest[job_id] = (attempt, item)
    if len(latest) == len(items):
        return list(items)  # the usual case: no job twice
    return [item for _, item in latest.values()]
