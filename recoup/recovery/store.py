"""The dunning store protocol: invoices, their attempts and events, per-tenant dunning
settings, and the card history the planner's network limits count. Implemented by both
backends (`recoup.storage.sqlite`, `recoup.storage.postgres`) in the same database as the jobs,
so that one query can see an attempt and its job.

Every change of an invoice goes through `change_invoice`: the row is locked (PostgreSQL
`SELECT … FOR UPDATE`; SQLite `BEGIN IMMEDIATE`), read again, handed to a pure function, and
what it returns is written in the same transaction, guarded by the invoice's `version`. That is
the "lock, re-check, act" of anything that moves money.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from recoup.dunning.invoice import AttemptRecord, Invoice, InvoiceEvent, InvoiceState
from recoup.dunning.limits import CardAttempt
from recoup.timekeeping.instants import require_aware


@dataclass(frozen=True, kw_only=True)
class InvoiceChange:
    """What one transition writes: the invoice as it now is (its `version` one more than the
    version read) and the events it adds (new `seq`s; an id already stored is skipped)."""

    invoice: Invoice
    events: tuple[InvoiceEvent, ...] = ()


@dataclass(frozen=True, kw_only=True)
class InvoiceFilter:
    tenant: str
    state: InvoiceState | None = None
    customer_id: str | None = None
    limit: int = 50  # 1–1000
    cursor: str | None = None  # opaque; from the previous page


@dataclass(frozen=True, kw_only=True)
class InvoicePage:
    invoices: list[Invoice]  # ordered by (created_at, invoice_id)
    next_cursor: str | None


@dataclass(frozen=True, kw_only=True)
class DunningSettings:
    """A tenant's dunning configuration. `policy_toml` is the text of a policy file (None: the
    `business-days` preset); `event_url` receives the signed `invoice.*` events (None: events
    are kept in the timeline only); `charge_url` is the default retry-charge endpoint."""

    tenant: str
    policy_toml: str | None
    event_url: str | None
    charge_url: str | None
    updated_at: datetime

    def __post_init__(self) -> None:
        require_aware("updated_at", self.updated_at)


@dataclass(frozen=True, kw_only=True)
class AttemptRef:
    """An attempt whose job disagrees with it (see `attempts_out_of_sync`)."""

    tenant: str
    invoice_id: str
    attempt: AttemptRecord


class DunningStore(Protocol):
    def create_invoice(
        self, invoice: Invoice, events: Sequence[InvoiceEvent]
    ) -> tuple[Invoice, bool]:
        """Insert the invoice, its attempts and its events in one transaction → (it, True).
        If the tenant already has an invoice with that id: (the stored one, False), nothing
        written (the unique key decides concurrent inserts)."""
        ...

    def get_invoice(self, tenant: str, invoice_id: str) -> Invoice | None: ...

    def list_invoices(self, query: InvoiceFilter) -> InvoicePage:
        """A page of the tenant's invoices, optionally of one state and/or customer.
        A limit outside 1–1000 or a malformed cursor → `InvalidInput` naming it."""
        ...

    def change_invoice(
        self,
        tenant: str,
        invoice_id: str,
        change: Callable[[Invoice], InvoiceChange | None],
    ) -> InvoiceChange | None:
        """Lock the invoice, read it with its attempts, call `change` on it once, and write
        what it returns: the invoice row, every attempt (insert or update by number) and the
        new events. None (nothing written) when the invoice is absent or `change` returns
        None. A returned invoice whose version is not the read one plus one → `Conflict`."""
        ...

    def invoice_events(self, tenant: str, invoice_id: str) -> list[InvoiceEvent]:
        """Every event of the invoice, by `seq`."""
        ...

    def undispatched_events(self, *, limit: int = 500) -> list[InvoiceEvent]:
        """Sendable events (`is_sent`) of every tenant not yet marked dispatched, oldest
        first: what a crash between a transition and its event jobs left behind."""
        ...

    def mark_events_dispatched(self, event_ids: Sequence[str], *, now: datetime) -> None: ...

    def attempts_out_of_sync(self, *, limit: int = 500) -> list[AttemptRef]:
        """Attempts of every tenant whose job disagrees: `scheduled` with no job of that id,
        or `cancelled` whose job is still live (scheduled or running)."""
        ...

    def card_history(self, tenant: str, card: str, *, since: datetime) -> list[CardAttempt]:
        """The card's attempts at or after `since`, over all the tenant's invoices: each
        invoice's failure (`reattempt=False`) and every attempt not cancelled
        (`reattempt=True`), with the invoice's merchant id and amount."""
        ...

    def get_settings(self, tenant: str) -> DunningSettings | None: ...
    def put_settings(self, settings: DunningSettings) -> DunningSettings:
        """Insert or replace the tenant's settings; return them as stored."""
        ...


__all__ = [
    "AttemptRef",
    "DunningSettings",
    "DunningStore",
    "InvoiceChange",
    "InvoiceFilter",
    "InvoicePage",
]
