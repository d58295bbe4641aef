"""The Python API: one-off jobs, recurring schedules, and an embedded worker.

A thin layer over the store: it validates at the edge (SSRF guard, names, rules), stamps `now`
from its clock, and turns "absent" into `NotFound`. The CLI and the HTTP API call it; an
application embeds it:

    scheduler = Scheduler(open_store("sqlite:///recoup.db"))
    with scheduler.running_worker(handlers=registry):
        scheduler.enqueue(PythonTarget(handler="send-receipt"), delay=timedelta(minutes=5))
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from recoup.errors import Conflict, InvalidInput, NotFound
from recoup.jobs import patching
from recoup.jobs.changes import JobChange
from recoup.jobs.flow import DEFAULT_FLOW_PERIOD
from recoup.jobs.metadata import check_filter
from recoup.jobs.model import (
    DEFAULT_TENANT,
    MAX_ATTEMPTS,
    BackoffPolicy,
    HttpTarget,
    Job,
    JobState,
    NewJob,
    Run,
    Target,
    Tenant,
    check_one_off_name,
    check_printable,
)
from recoup.jobs.redrive import FailedFilter, Redrive, audit
from recoup.jobs.schedules.calls import ScheduleCalls
from recoup.jobs.signing import new_signing_secret
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.store import (
    MAX_PAGE,
    JobFilter,
    JobPage,
    RunFilter,
    RunPage,
    SchedulerStore,
)
from recoup.jobs.target_checks import (
    check_headers,
    check_method,
    check_target,
    target_looks_up,
)
from recoup.jobs.trace_context import TraceContext
from recoup.jobs.worker import Worker, WorkerConfig
from recoup.jobs.worker.config import KNOBS, worker_config
from recoup.timekeeping.clock import Clock, SystemClock
from recoup.timekeeping.instants import to_utc

_KEEP_DEFAULT = timedelta(days=7)  # as NewJob's default retention
WORKER_START_TIMEOUT = 10.0  # seconds to wait for an embedded worker to start


# What creating a job does when its idempotency key is taken: answer the job holding it, or
# replace that job while it has not started.
OnConflict = Literal["return", "replace"]
ON_CONFLICT: tuple[OnConflict, ...] = ("return", "replace")


class Scheduler(ScheduleCalls):
    """Jobs and schedules of a store (a `SchedulerStore`: every `recoup.storage` backend).

    `ssrf` checks HTTP targets when they are created (the default refuses non-public
    addresses). Every method takes `tenant` (default "default")."""

    def __init__(
        self, store: SchedulerStore, *, clock: Clock | None = None, ssrf: SsrfGuard | None = None
    ) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.ssrf = ssrf or SsrfGuard()
        self._workers: list[Worker] = []
        self._default_tenant_ready = False

    def default_tenant(self) -> Tenant:
        """The embedded default tenant, created with a fresh `whsec_` signing secret on first
        use (jobs and schedules of `DEFAULT_TENANT` ensure it, so HTTP jobs enqueued without
        the HTTP service go out signed). Idempotent and race-safe: the store inserts the row
        only if absent and returns the stored one, so every process agrees on one secret."""
        tenant: Tenant = self.store.ensure_tenant(
            Tenant(
                id=DEFAULT_TENANT,
                name=DEFAULT_TENANT,
                signing_secret=new_signing_secret(),
                created_at=self.clock.now(),
            )
        )
        self._default_tenant_ready = True
        return tenant

    def _ensure_tenant(self, tenant: str) -> None:
        if tenant == DEFAULT_TENANT and not self._default_tenant_ready:
            self.default_tenant()

    # -- one-off jobs ------------------------------------------------------------------------

    def check_target(self, target: Target, *, payload: Any = None) -> Target:
        """Validate a target at creation (`target_checks.check_target`, with this scheduler's
        SSRF guard): what would only fail at send time fails here."""
        return check_target(self.ssrf, target, payload)

    def looks_up(self, target: Target) -> bool:
        """Whether `check_target(target)` would ask DNS: an event loop runs it in a thread."""
        return target_looks_up(self.ssrf, target)

    def enqueue(
        self,
        target: Target,
        *,
        run_at: datetime | None = None,
        delay: timedelta | None = None,
        name: str | None = None,
        payload: Any = None,
        idempotency_key: str | None = None,
        retry: BackoffPolicy | None = None,
        timeout: timedelta = timedelta(seconds=30),
        keep_for: timedelta | None = _KEEP_DEFAULT,
        tenant: str = DEFAULT_TENANT,
        group: str | None = None,
        metadata: dict[str, str] | None = None,
        flow_key: str | None = None,
        flow_rate: int | None = None,
        flow_period: timedelta = DEFAULT_FLOW_PERIOD,
        flow_parallelism: int | None = None,
        ordering_key: str | None = None,
        ordering_skip_failed: bool = False,
        on_conflict: OnConflict = "return",
        trace: TraceContext | None = None,
    ) -> Job:
        """Schedule one job at `run_at`, or `delay` from now, or now (not both). A live job of
        the tenant with the same name → `Conflict`; the same idempotency key → that job.
        `group` (1–200 characters) lets `list_jobs(group=…)` and `cancel_group` find it;
        `metadata` (`recoup.jobs.metadata`) is the caller's own, filterable. `flow_key` with
        `flow_rate` (per `flow_period`) and/or `flow_parallelism` limits the starts of the
        tenant's jobs of that key (`recoup.jobs.flow`); `ordering_key` starts them one at a time
        in due-then-creation order, a failed one holding the others unless
        `ordering_skip_failed`. `on_conflict="replace"`: a job of the same idempotency key not
        started yet is replaced by this one (with `delay`, a debounce: each call moves the run
        to `delay` after the last); one already started is returned as it is. `trace`
        (`recoup.jobs.trace_context`) is sent with every delivery."""
        if run_at is not None and delay is not None:
            raise InvalidInput("run_at", run_at, "give run_at or delay, not both")
        now = self.clock.now()
        when = to_utc("run_at", run_at) if run_at is not None else now + (delay or timedelta(0))
        job = NewJob(
            run_at=when,
            target=target,
            tenant=tenant,
            name=name,
            payload=payload,
            idempotency_key=idempotency_key,
            retry=retry or BackoffPolicy(),
            timeout=timeout,
            keep_for=keep_for,
            group=group,
            metadata=metadata or {},
            flow_key=flow_key,
            flow_rate=flow_rate,
            flow_period=flow_period,
            flow_parallelism=flow_parallelism,
            ordering_key=ordering_key,
            ordering_skip_failed=ordering_skip_failed,
            trace=trace,
        )
        return self.submit(job, on_conflict=on_conflict)

    def submit(self, job: NewJob, *, on_conflict: OnConflict = "return") -> Job:
        """Insert a prepared `NewJob` (after the same checks as `enqueue`)."""
        self.check(job)
        return self.insert_checked(job, on_conflict=on_conflict)

    def check(self, job: NewJob) -> None:
        """`submit`'s checks (the SSRF guard's DNS look-up included) without the insert, for a
        caller that inserts inside a transaction of its own and checks before it begins."""
        _check_text(job)
        self.check_target(job.target, payload=job.payload)
        self._ensure_tenant(job.tenant)

    def insert_checked(self, job: NewJob, *, on_conflict: OnConflict = "return") -> Job:
        """Insert a job that `check` passed, without checking it again. A job already holding
        its idempotency key is returned, or with `on_conflict="replace"` replaced by this one
        while it has not started (atomically against a claim)."""
        if on_conflict not in ON_CONFLICT:
            raise InvalidInput("on_conflict", on_conflict, f"expected one of {list(ON_CONFLICT)}")
        if on_conflict == "replace" and job.idempotency_key is None:
            raise InvalidInput("on_conflict", on_conflict, "expected an idempotency_key with it")
        now = self.clock.now()
        stored = self.store.insert(job, now=now)
        if on_conflict == "replace" and stored.id != job.id:
            found = self.store.replace_unstarted_job(stored.tenant, stored.id, job, now=now)
            stored = found.job if found.changed and found.job is not None else stored
        self._poke()
        return stored

    def enqueue_many(self, jobs: Sequence[NewJob]) -> int:
        """Bulk insert; jobs clashing on a live name or an idempotency key are skipped.
        Returns how many were inserted."""
        checked: set[str] = set()
        for job in jobs:
            if isinstance(job.target, HttpTarget) and job.target.url not in checked:
                self.check_target(job.target, payload=job.payload)  # DNS: once per URL
                checked.add(job.target.url)
        return self.insert_many_checked(jobs, now=self.clock.now())

    def insert_many_checked(self, jobs: Sequence[NewJob], *, now: datetime) -> int:
        """The insert every bulk creation of jobs goes through (`enqueue_many`, the dunning
        runtime's transitions): the checks that need no look-up (names, control characters,
        an HTTP target's method and headers), then one insert at `now` in which a job clashing
        on a live name or an idempotency key is skipped. For jobs whose target URLs were
        checked before (the SSRF guard resolves names: not inside a caller's transaction);
        `now` is the caller's, since a unit of work reads no clock. Returns how many were
        inserted."""
        for job in jobs:
            _check_text(job)
            if isinstance(job.target, HttpTarget):
                check_method(job.target, job.payload)
                check_headers(job.target.headers)
        for tenant in {job.tenant for job in jobs}:
            self._ensure_tenant(tenant)
        count = self.store.insert_many(jobs, now=now) if jobs else 0
        self._poke()
        return count

    def get(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> Job:
        job = self.store.get(tenant, job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        return job

    def get_by_name(self, name: str, *, tenant: str = DEFAULT_TENANT) -> Job:
        """The live job of that name, else the most recent one."""
        job = self.store.get_by_name(tenant, name)
        if job is None:
            raise NotFound(f"no job named {name!r}")
        return job

    def list_jobs(
        self,
        *,
        tenant: str = DEFAULT_TENANT,
        state: JobState | None = None,
        name: str | None = None,
        name_prefix: str | None = None,
        schedule_id: str | None = None,
        group: str | None = None,
        metadata: dict[str, str] | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobPage:
        """Jobs of the tenant, newest first, a page at a time; `name` and `group` match
        exactly; every pair of `metadata` must be in a job's metadata."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput("limit", limit, f"expected 1–{MAX_PAGE}")
        return self.store.list_jobs(
            JobFilter(
                tenant=tenant,
                state=state,
                name=name,
                name_prefix=name_prefix,
                schedule_id=schedule_id,
                group=group,
                metadata=None if metadata is None else check_filter(metadata),
                limit=limit,
                cursor=cursor,
            )
        )

    def update_job(self, job_id: str, change: JobChange, *, tenant: str = DEFAULT_TENANT) -> Job:
        """Change a job that has not started (`recoup.jobs.changes`); `JobStarted` (a
        `Conflict`) if it has started or ended."""
        return patching.update_job(self, job_id, change, tenant=tenant)

    def runs(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> list[Run]:
        """The run log of a job, oldest first (kept after the job itself is pruned)."""
        return self.store.runs(tenant, job_id)

    def list_runs(
        self,
        job_id: str,
        *,
        tenant: str = DEFAULT_TENANT,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        """A page of the job's run log, first attempt first; `NotFound` for an unknown job
        (not an empty log). A bad `limit` or `cursor` is `InvalidInput` first, job or not."""
        page = self.store.list_runs(
            RunFilter(tenant=tenant, job_id=job_id, limit=limit, cursor=cursor)
        )
        if not page.runs:
            self.get(job_id, tenant=tenant)  # an empty page of a job that exists, or none
        return page

    def cancel(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> Job:
        """Cancel a live job; a final job is returned unchanged. An attempt in flight is
        stopped by its worker at its next heartbeat and its outcome is not applied."""
        job = self.store.cancel(tenant, job_id, now=self.clock.now())
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        return job

    def redrive(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> Job:
        """Schedule a job that failed for good again, now, with a fresh budget of attempts
        (`JobStore.redrive`); its run log is kept. `Conflict` unless it failed, or when it has
        spent the ceiling of attempts or a live job holds its name."""
        redriven = self.store.redrive(tenant, job_id, now=self.clock.now())
        if redriven is not None:
            return redriven
        job = self.get(job_id, tenant=tenant)  # NotFound if absent; else say why not
        if job.state is not JobState.FAILED:
            why = f"is {job.state.value}; only a failed job can be retried"
        elif job.attempts >= MAX_ATTEMPTS:
            why = f"has made {job.attempts} attempts, the most a job can make"
        else:
            why = f"cannot be retried while a live job holds its name {job.name!r}"
        raise Conflict(f"job {job_id!r} {why}")

    def redrive_failed(self, found: FailedFilter, *, who: str, dry_run: bool = False) -> Redrive:
        """Count the failed jobs `found` names, then (unless `dry_run`) redrive each
        (`redrive`: the budget it was created with); either way an audit line says `who`
        asked, when, for which filter and how many (`recoup.jobs.redrive.audit`)."""
        now = self.clock.now()
        if dry_run:
            outcome = Redrive(matched=self.store.count_failed(found), redriven=0, dry_run=True)
        else:
            matched, redriven = self.store.redrive_failed(found, now=now)
            outcome = Redrive(matched=matched, redriven=redriven, dry_run=False)
        audit(who, now, found, outcome)
        return outcome

    def delete_failed(self, job_id: str, *, tenant: str = DEFAULT_TENANT) -> bool:
        """Delete a job that failed for good (its run log stays until pruned); False unless
        it was one."""
        return self.store.delete_failed(tenant, job_id)

    def cancel_by_name(self, name: str, *, tenant: str = DEFAULT_TENANT) -> int:
        return self.store.cancel_by_name(tenant, name, now=self.clock.now())

    def cancel_by_prefix(self, prefix: str, *, tenant: str = DEFAULT_TENANT) -> int:
        """Cancel the live jobs whose name starts with `prefix` (taken literally; an empty
        prefix → `InvalidInput`, the store's rule); return how many."""
        return self.store.cancel_by_prefix(tenant, prefix, now=self.clock.now())

    def cancel_group(self, group: str, *, tenant: str = DEFAULT_TENANT) -> int:
        """Cancel the live jobs of exactly `group` (not a prefix); return how many."""
        if not 1 <= len(group) <= 200:
            raise InvalidInput("group", group, "expected 1–200 characters")
        return self.store.cancel_group(tenant, group, now=self.clock.now())

    # -- embedded worker ---------------------------------------------------------------------

    def worker(self, config: WorkerConfig | None = None, **options: Any) -> Worker:
        """A `Worker` over this scheduler's store, clock and SSRF guard. `options` are the
        worker's collaborators (`handlers=`, `rng=`, …) and, for convenience, `WorkerConfig`
        fields by name (`concurrency=4`), made into its configuration: with `config` too, a
        field given by name is refused (`InvalidInput` naming it)."""
        knobs = {name: options.pop(name) for name in list(options) if name in KNOBS}
        options.setdefault("clock", self.clock)
        options.setdefault("ssrf", self.ssrf)
        return Worker(self.store, worker_config(config, knobs), **options)

    @contextlib.contextmanager
    def running_worker(
        self, config: WorkerConfig | None = None, **options: Any
    ) -> Iterator[Worker]:
        """Run a worker in a background thread (its own event loop) for the `with` block;
        on exit, stop it gracefully and wait for it. Jobs enqueued through this scheduler
        meanwhile wake it at once."""
        worker = self.worker(config, **options)
        failure: list[BaseException] = []

        def main() -> None:
            try:
                asyncio.run(worker.run())
            except BaseException as exc:  # surfaced to the caller on exit
                failure.append(exc)
                worker.started.set()

        thread = threading.Thread(
            target=main, name=f"recoup-worker-{worker.worker_id}", daemon=True
        )
        thread.start()
        if not worker.started.wait(WORKER_START_TIMEOUT) or failure:
            worker.request_stop()
            thread.join(WORKER_START_TIMEOUT)
            raise RuntimeError("the embedded worker did not start") from (
                failure[0] if failure else None
            )
        self._workers.append(worker)
        try:
            yield worker
        finally:
            self._workers.remove(worker)
            worker.request_stop()
            thread.join(worker.grace.total_seconds() + WORKER_START_TIMEOUT)
            if failure:
                raise failure[0]

    def poke_workers(self) -> None:
        """Wake the embedded workers (jobs were added or moved earlier)."""
        self._poke()

    def jobs_added(self) -> None:
        """Wake this process's workers for jobs a caller inserted through the store itself
        (the API's one-statement creation), as `enqueue` does for its own."""
        self._poke()

    def _poke(self) -> None:
        for worker in self._workers:
            worker.poke()


def _check_text(job: NewJob) -> None:
    """A job's name and group as every creation holds them (no '@' in a one-off job's name,
    no control characters)."""
    if job.schedule_id is None:
        check_one_off_name(job.name)
    check_printable("name", job.name)
    check_printable("group", job.group)


__all__ = ["Scheduler", "check_method"]
