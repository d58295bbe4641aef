"""The one store seam: `Store`, what `recoup.storage.open_store` returns on every backend, and
`ApiTables`, what `recoup.storage.open_api_tables` returns beside it.

`Store` is the union of the protocols declared beside the code that uses them (the job and
schedule stores of `recoup.jobs.store`, the dunning store of `recoup.recovery.store`, the
tenant store of `recoup.tenancy`, the intake store of `recoup.recovery.intake_store`) plus what
an operator needs of a database: a readiness check, its schema version and migrations, and
where it is. Code that needs less takes the narrower protocol (the `Scheduler` a
`SchedulerStore`, the worker a `JobStore`); an in-memory fake implements only what its test
needs.

The API's tables (idempotency keys and tokens) live in the store's database but are a separate
object: `IdempotencyStore` and `JobStore` both name an operation `release`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from recoup.idempotency.keys import IdempotencyStore
from recoup.jobs.store import JobStore, ScheduleStore
from recoup.recovery.customer_store import CustomerStore
from recoup.recovery.email_store import MessageStore
from recoup.recovery.hosted_store import HostedChargeStore
from recoup.recovery.intake_store import IntakeStore
from recoup.recovery.store import DunningStore
from recoup.tenancy import ActionLog, TenantStore, TokenStore

if TYPE_CHECKING:
    from recoup.storage.job_creations import Created, Declined, JobCreation
    from recoup.storage.sql_files import Migration

T = TypeVar("T")


class ApiTables(IdempotencyStore, TokenStore, ActionLog, Protocol):
    """The HTTP API's tables in a store's database: idempotency keys, API tokens and what
    their holders did from the dashboard, plus a readiness check."""

    def end_session(self, nonce: str, *, expires: int) -> None:
        """A dashboard session ended by its logout, remembered until it would have expired."""
        ...

    def session_ended(self, nonce: str) -> bool: ...

    def prune_ended_sessions(self, *, before: int) -> int:
        """Forget ended sessions that expired before `before` (Unix seconds); how many."""
        ...

    def ping(self) -> None:
        """Raise `StorageError` unless the database answers."""
        ...

    def create_job(self, creation: JobCreation) -> Created | Declined:
        """The API's usual job creation, key and answer included, as one unit, or nothing
        written (`recoup.storage.job_creations`)."""
        ...


class Store(JobStore, ScheduleStore, DunningStore, IntakeStore, TenantStore, Protocol):
    """Every store protocol on one database (SQLite or PostgreSQL)."""

    @property
    def hosted(self) -> HostedChargeStore:
        """Hosted charging's tables: a part of the store (composed, not inherited)."""
        ...

    @property
    def messages(self) -> MessageStore:
        """Customers' emails' tables: settings, the ledger (composed, like `hosted`)."""
        ...

    @property
    def customers(self) -> CustomerStore:
        """Customers and their renewals: a part of the store, as `hosted` is."""
        ...

    @property
    def backend(self) -> str:
        """ "sqlite" or "postgresql"."""
        ...

    @property
    def schema(self) -> str | None:
        """The PostgreSQL schema holding the tables; None on SQLite."""
        ...

    def ping(self) -> None:
        """Raise `StorageError` unless the database answers."""
        ...

    def schema_version(self) -> int:
        """The migration version in force; 0 for a database never migrated."""
        ...

    def migrations(self) -> list[Migration]:
        """The backend's numbered migrations, in order (those in force and those pending)."""
        ...

    def api_tables(self) -> ApiTables:
        """The API's tables in this store's database (`recoup.storage.open_api_tables`)."""
        ...

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run `fn`, whose reads and writes go through this store, as one transaction."""
        ...


__all__ = ["ApiTables", "Store"]
