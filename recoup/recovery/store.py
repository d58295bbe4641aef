"""The dunning store protocol: invoices, their attempts and events, per-tenant dunning
settings, and the card history the planner's network limits count. Implemented by both
backends (`recoup.storage.sqlite`, `recoup.storage.postgres`) in the same database as the jobs,
so that one query can see an attempt and its job.

Every change of an invoice goes through `change_invoice`: the row is locked (PostgreSQL
`SELECT … FOR UPDATE`; SQLite `BEGIN IMMEDIATE`), read again, handed to a pure function, and
what it returns is written in the same transaction, guarded by the invoice's `version`. That is
the "lock, re-check, act" of anything that moves money.

The recovery report reads through here too: the invoices that failed in a window, in bulk
(`report_invoices`), counts of events by type (`count_events`: double charges) and the
merchant ids an operator has tagged (`merchant_tags`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from recoup.analytics.recovery import TAG_KINDS, MerchantTag
from recoup.dunning.invoice import AttemptRecord, Invoice, InvoiceEvent, InvoiceState
from recoup.dunning.limits import CardAttempt
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import require_aware

if TYPE_CHECKING:
    from recoup.recovery.figures import DunningFigures, TenantFigures

MAX_EXPERIMENT_NAME = 100


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
    are kept in the timeline only); `charge_url` is the default retry-charge endpoint.

    A policy experiment (all three `experiment_*` set, or none): the share `experiment_share`
    of new invoices, picked by a hash of (tenant, invoice, `experiment_name`), is planned with
    `experiment_policy_toml` (arm b) instead of `policy_toml` (arm a)."""

    tenant: str
    policy_toml: str | None
    event_url: str | None
    charge_url: str | None
    updated_at: datetime
    experiment_name: str | None = None
    experiment_policy_toml: str | None = None
    experiment_share: float | None = None

    def __post_init__(self) -> None:
        require_aware("updated_at", self.updated_at)
        experiment = {
            "experiment_name": self.experiment_name,
            "experiment_policy_toml": self.experiment_policy_toml,
            "experiment_share": self.experiment_share,
        }
        given = [name for name, value in experiment.items() if value is not None]
        if given and len(given) < len(experiment):
            missing = next(name for name, value in experiment.items() if value is None)
            raise InvalidInput(
                missing, None, f"expected all of {sorted(experiment)} together, or none"
            )
        name = self.experiment_name
        if name is not None and (not 1 <= len(name) <= MAX_EXPERIMENT_NAME or "\x00" in name):
            raise InvalidInput(
                "experiment_name", name, f"expected 1–{MAX_EXPERIMENT_NAME} characters"
            )
        share = self.experiment_share
        if share is not None and not 0 < share < 1:  # also refuses NaN
            raise InvalidInput(
                "experiment_share", share, "expected a share strictly between 0 and 1"
            )

    @property
    def has_experiment(self) -> bool:
        return self.experiment_name is not None


MAX_MERCHANT_ID = 100
MAX_TAG_NOTE = 1000


def check_merchant_tag(tag: MerchantTag) -> None:
    """`InvalidInput` naming the field for a tag the table would refuse."""
    if not 1 <= len(tag.merchant_id) <= MAX_MERCHANT_ID or "\x00" in tag.merchant_id:
        raise InvalidInput(
            "merchant_id", tag.merchant_id, f"expected 1–{MAX_MERCHANT_ID} characters"
        )
    if tag.tag not in TAG_KINDS:
        raise InvalidInput("tag", tag.tag, f"expected one of {', '.join(TAG_KINDS)}")
    if len(tag.note) > MAX_TAG_NOTE or "\x00" in tag.note:
        raise InvalidInput("note", tag.note, f"expected at most {MAX_TAG_NOTE} characters")
    require_aware("tagged_at", tag.tagged_at)


@dataclass(frozen=True, kw_only=True)
class AttemptRef:
    """An attempt whose job disagrees with it (see `attempts_out_of_sync`,
    `attempts_ended_unanswered`)."""

    tenant: str
    invoice_id: str
    attempt: AttemptRecord
    job_state: str | None = None  # `attempts_ended_unanswered`: its job's end, None: gone


@dataclass(frozen=True, kw_only=True)
class AnsweredAttempt:
    """An attempt with its final answer (succeeded or failed) and what the learner needs of
    its invoice (`learner_attempts`)."""

    invoice_id: str
    attempt: AttemptRecord
    timezone: str
    country: str | None
    decline_code: str | None
    advice_code: str | None
    card_network: str | None


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

    def event_count(self, tenant: str, invoice_id: str) -> int:
        """How many events the invoice has: the next event's `seq`."""
        ...

    def undispatched_events(self, *, limit: int = 500) -> list[InvoiceEvent]:
        """Sendable events (`is_sent`) of every tenant not yet marked dispatched, oldest
        first: what a crash between a transition and its event jobs left behind."""
        ...

    def mark_events_dispatched(self, event_ids: Sequence[str], *, now: datetime) -> None: ...

    def attempts_out_of_sync(self, *, limit: int = 500) -> list[AttemptRef]:
        """Attempts of every tenant whose job disagrees: `scheduled` with no job of that id,
        or `cancelled` whose job is scheduled and was never claimed (one already asked is left
        to finish: the answer to a charge request must be heard)."""
        ...

    def attempts_ended_unanswered(self, *, limit: int = 500) -> list[AttemptRef]:
        """Open attempts of every tenant (`scheduled`, `pending`) whose job ended without an
        answer: cancelled or failed for good, or (pending) gone; `job_state` says which."""
        ...

    def card_history(self, tenant: str, card: str, *, since: datetime) -> list[CardAttempt]:
        """The card's attempts at or after `since`, over all the tenant's invoices: each
        invoice's failure (`reattempt=False`) and every attempt not cancelled
        (`reattempt=True`), with the invoice's merchant id and amount."""
        ...

    def learner_attempts(
        self, tenant: str, *, since: datetime, limit: int = 10_000
    ) -> list[AnsweredAttempt]:
        """The tenant's attempts answered (succeeded or failed) at or after `since`, oldest
        answer first, at most `limit` (`recovery.learning` reads on from the last)."""
        ...

    def get_settings(self, tenant: str) -> DunningSettings | None: ...
    def put_settings(self, settings: DunningSettings) -> DunningSettings:
        """Insert or replace the tenant's settings; return them as stored."""
        ...

    # What the recovery report reads

    def report_invoices(self, tenant: str, *, since: datetime, until: datetime) -> list[Invoice]:
        """Every invoice of the tenant whose failure is in [since, until), with its attempts,
        ordered by (failed_at, invoice_id): two statements in one snapshot (the invoices,
        then all their attempts), however many invoices."""
        ...

    def count_events(self, tenant: str, type: str, *, since: datetime, until: datetime) -> int:
        """How many of the tenant's events of `type` happened in [since, until)."""
        ...

    def dunning_figures(self) -> DunningFigures:
        """Every tenant's invoices by state, amounts by state and currency, attempts by state
        and double charges (for /metrics: three grouped statements in one snapshot)."""
        ...

    def dunning_amounts(self, tenant: str, *, since: datetime, until: datetime) -> TenantFigures:
        """The tenant's invoices that failed in [since, until) (the report's window), counted
        by state and their amounts summed by kind and currency, as `dunning_figures` counts
        every invoice (its `attempts` and `double_charges` left empty)."""
        ...

    def put_merchant_tag(self, tenant: str, tag: MerchantTag) -> MerchantTag:
        """Tag a merchant id (replacing its tag, if any); return the tag as stored. A tag
        outside `TAG_KINDS` → `InvalidInput` naming `tag`."""
        ...

    def delete_merchant_tag(self, tenant: str, merchant_id: str) -> bool:
        """Remove the merchant id's tag → whether there was one."""
        ...

    def merchant_tags(self, tenant: str) -> list[MerchantTag]:
        """The tenant's tags, by merchant id."""
        ...


__all__ = [
    "AnsweredAttempt",
    "AttemptRef",
    "DunningSettings",
    "DunningStore",
    "InvoiceChange",
    "InvoiceFilter",
    "InvoicePage",
    "MerchantTag",
    "check_merchant_tag",
]
