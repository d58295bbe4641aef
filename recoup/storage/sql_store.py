"""The store assembled from its parts (`SqlStore`): the backend's dialect and the parts written
for its driver (`StoreParts`: the queue, worker sessions, migrations, claiming an idempotency
key), and the table classes written once over the dialect, which it builds itself. Every
operation of `recoup.storage.Store` is one of the parts' own methods, bound in `__init__`, so a
call costs what it did when the store inherited them.

`SqliteStore` and `PostgresStore` make their backend's parts and hand them here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from recoup.jobs.model import Completion, Job, NewJob
from recoup.jobs.store import ClaimParams
from recoup.jobs.worker_records import SessionRules, WorkerInfo, WorkerSession
from recoup.storage.api_tables import ClaimKey, SqlApiTables
from recoup.storage.change_tables import SqlChangeTables
from recoup.storage.customer_tables import SqlCustomerTables
from recoup.storage.dead_letters import SqlDeadLetters
from recoup.storage.dialect import Dialect
from recoup.storage.dunning_reports import SqlDunningReports
from recoup.storage.dunning_tables import SqlDunningTables
from recoup.storage.hosted_tables import SqlHostedTables
from recoup.storage.intake_tables import SqlIntakeTables
from recoup.storage.job_creations import CreateJob
from recoup.storage.job_tables import SqlJobTables
from recoup.storage.lease_tables import SqlLeaseTables
from recoup.storage.message_tables import SqlMessageTables
from recoup.storage.tenant_tables import SqlTenantTables

T = TypeVar("T")


class JobQueue(Protocol):
    """A backend's hot path, written for its driver (`sqlite.queue`, `postgres.queue`)."""

    def insert(self, job: NewJob, *, now: datetime) -> Job: ...
    def insert_many(self, jobs: Sequence[NewJob], *, now: datetime) -> int: ...
    def prepare_jobs(self, jobs: Sequence[NewJob], now: datetime) -> Sequence[Any]: ...
    def insert_prepared(self, conn: Any, prepared: Sequence[Any], now: datetime) -> int: ...
    def cancel(
        self, tenant: str, job_id: str, *, now: datetime, begun: bool = True
    ) -> Job | None: ...
    def claim_due(self, params: ClaimParams) -> list[Job]: ...
    def complete_many(self, completions: Sequence[Completion], *, now: datetime) -> list[str]: ...
    def rescue_expired(
        self, *, now: datetime, limit: int = 1000, store_clock: bool = False
    ) -> list[str]: ...
    def read_clock(self) -> datetime: ...
    def wait_for_notify(self, timeout: float) -> bool: ...


class WorkerSessions(Protocol):
    """A backend's worker sessions (`sqlite.workers`, `postgres.workers`)."""

    def open_worker_session(
        self,
        worker: WorkerInfo,
        *,
        now: datetime,
        rules: SessionRules,
        replacing: bool = False,
    ) -> WorkerSession | None: ...
    def rescue_dead_workers(
        self, *, now: datetime, rules: SessionRules, limit: int = 100
    ) -> dict[str, list[str]]: ...


class Migrator(Protocol):
    """A backend's migrations (`sqlite.migrator`, `postgres.migrator`)."""

    def migrate(self) -> int: ...
    def schema_version(self) -> int: ...


@dataclass(frozen=True, kw_only=True)
class StoreParts:
    """What a backend makes for its store; the rest is written once over `dialect`."""

    dialect: Dialect
    queue: JobQueue
    workers: WorkerSessions
    migrator: Migrator
    claim_key: ClaimKey  # `SqlApiTables.begin`'s per-backend part
    create_job: CreateJob  # `SqlApiTables.create_job`'s
    close: Sequence[Callable[[], None]]  # what `close` closes, in order


class SqlStore:
    """Every store protocol (`recoup.storage.Store`) over one backend's parts."""

    def __init__(self, parts: StoreParts) -> None:
        dialect = self.dialect = parts.dialect
        self.backend = dialect.backend
        self.schema = dialect.schema
        self._parts = parts

        jobs = SqlJobTables(dialect, parts.queue)
        self.ping = jobs.ping
        self.migrations = jobs.migrations
        self.ensure_tenant = jobs.ensure_tenant
        self.get_tenant = jobs.get_tenant
        self.list_tenants = jobs.list_tenants
        self.cancel_by_name = jobs.cancel_by_name
        self.cancel_by_prefix = jobs.cancel_by_prefix
        self.cancel_group = jobs.cancel_group
        self.get = jobs.get
        self.get_by_name = jobs.get_by_name
        self.list_jobs = jobs.list_jobs
        self.runs = jobs.runs
        self.list_runs = jobs.list_runs
        self.count_by_state = jobs.count_by_state
        self.count_live = jobs.count_live
        self.count_by_tenant = jobs.count_by_tenant
        self.prune = jobs.prune
        self.insert_schedule = jobs.insert_schedule
        self.get_schedule = jobs.get_schedule
        self.list_schedules = jobs.list_schedules
        self.set_schedule_paused = jobs.set_schedule_paused
        self.delete_schedule = jobs.delete_schedule
        self.due_schedules = jobs.due_schedules
        self.advance_schedule = jobs.advance_schedule
        self.next_due_at = jobs.next_due_at
        self.due_backlog = jobs.due_backlog
        self.workers = jobs.workers

        queue = parts.queue
        self.insert = queue.insert
        self.insert_many = queue.insert_many
        self.cancel = queue.cancel
        self.claim_due = queue.claim_due
        self.complete_many = queue.complete_many
        self.rescue_expired = queue.rescue_expired
        self.read_clock = queue.read_clock
        self.wait_for_notify = queue.wait_for_notify

        self.open_worker_session = parts.workers.open_worker_session
        self.rescue_dead_workers = parts.workers.rescue_dead_workers
        self.migrate = parts.migrator.migrate
        self.schema_version = parts.migrator.schema_version

        leases = SqlLeaseTables(dialect)
        self.heartbeat = leases.heartbeat
        self.release = leases.release

        dead_letters = SqlDeadLetters(dialect)
        self.redrive = dead_letters.redrive
        self.count_failed = dead_letters.count_failed
        self.redrive_failed = dead_letters.redrive_failed
        self.delete_failed = dead_letters.delete_failed

        # Hosted charging's tables are one part, exposed whole (`Store.hosted`).
        self.hosted = SqlHostedTables(dialect)
        # Customers' emails: settings, the ledger, payment pages (`Store.messages`).
        self.messages = SqlMessageTables(dialect)
        # Customers and their renewals, one part too (`Store.customers`).
        self.customers = SqlCustomerTables(dialect)

        changes = SqlChangeTables(dialect)
        self.update_scheduled_job = changes.update_scheduled_job
        self.replace_unstarted_job = changes.replace_unstarted_job
        self.replace_schedule = changes.replace_schedule

        tenants = SqlTenantTables(dialect)
        self.set_tenant_disabled = tenants.set_tenant_disabled
        self.replace_signing_secret = tenants.replace_signing_secret
        self.delete_tenant = tenants.delete_tenant

        dunning = SqlDunningTables(dialect)
        self.create_invoice = dunning.create_invoice
        self.get_invoice = dunning.get_invoice
        self.list_invoices = dunning.list_invoices
        self.change_invoice = dunning.change_invoice
        self.invoice_events = dunning.invoice_events
        self.event_count = dunning.event_count
        self.undispatched_events = dunning.undispatched_events
        self.mark_events_dispatched = dunning.mark_events_dispatched
        self.attempts_out_of_sync = dunning.attempts_out_of_sync
        self.attempts_ended_unanswered = dunning.attempts_ended_unanswered
        self.card_history = dunning.card_history
        self.get_settings = dunning.get_settings
        self.put_settings = dunning.put_settings

        reports = SqlDunningReports(dialect)
        self.report_invoices = reports.report_invoices
        self.learner_attempts = reports.learner_attempts
        self.count_events = reports.count_events
        self.dunning_figures = reports.dunning_figures
        self.dunning_amounts = reports.dunning_amounts
        self.put_merchant_tag = reports.put_merchant_tag
        self.delete_merchant_tag = reports.delete_merchant_tag
        self.merchant_tags = reports.merchant_tags

        intake = SqlIntakeTables(dialect)
        self.get_intake_settings = intake.get_intake_settings
        self.put_intake_settings = intake.put_intake_settings
        self.claim_event = intake.claim_event
        self.finish_event = intake.finish_event
        self.release_event = intake.release_event
        self.invoice_event_since = intake.invoice_event_since
        self.prune_events = intake.prune_events

    def read(self) -> AbstractContextManager[Any]:
        """A connection for reading, for code beside the store's own tables (see the dialect's
        `read`): its errors become `StorageError`."""
        return self.dialect.read()

    def write(self) -> AbstractContextManager[Any]:
        """One write transaction, committed when the block ends and rolled back if it raises
        (see the dialect's `write`): the store's own write lock, timeouts and errors."""
        return self.dialect.write()

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run `fn`, whose reads and writes go through this store, as one transaction (see
        `SqliteDialect.atomically` and `PostgresDialect.atomically`)."""
        return self.dialect.atomically(fn)

    def api_tables(self) -> SqlApiTables:
        """The API's tables in this store's database."""
        return SqlApiTables(self.dialect, self._parts.claim_key, self._parts.create_job)

    def close(self) -> None:
        for close in self._parts.close:
            close()


__all__ = ["JobQueue", "Migrator", "SqlStore", "StoreParts", "WorkerSessions"]
