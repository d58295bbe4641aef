"""What the dunning runtime needs of a backend (`RuntimeStore`): one protocol, declared next
to the code that uses it (`service`, `transition_jobs`), which every `recoup.storage`
backend implements."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from recoup.jobs.store import JobStore
from recoup.recovery.customer_store import CustomerStore
from recoup.recovery.email_store import MessageStore
from recoup.recovery.hosted_store import HostedChargeStore
from recoup.recovery.store import DunningStore

T = TypeVar("T")


class RuntimeStore(JobStore, DunningStore, Protocol):
    """What the runtime needs of a backend: jobs and dunning tables in one database, written
    together in one transaction, and hosted charging's tables beside them."""

    def atomically(self, fn: Callable[[], T]) -> T: ...

    @property
    def hosted(self) -> HostedChargeStore: ...

    @property
    def customers(self) -> CustomerStore: ...

    @property
    def messages(self) -> MessageStore: ...


__all__ = ["RuntimeStore"]
