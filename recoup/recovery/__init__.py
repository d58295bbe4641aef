"""The dunning runtime: the only place that joins the dunning core (what to do) and the jobs
(doing it later, once). Failures in; attempts, cancellations and events out."""

from recoup.recovery.attempts import AttemptRunner
from recoup.recovery.records import KEEP, FailureReport, Keep, Timeline
from recoup.recovery.runtime import dunning_runtime
from recoup.recovery.service import Dunning
from recoup.recovery.store import (
    DunningSettings,
    DunningStore,
    InvoiceChange,
    InvoiceFilter,
    InvoicePage,
)

__all__ = [
    "KEEP",
    "AttemptRunner",
    "Dunning",
    "DunningSettings",
    "DunningStore",
    "FailureReport",
    "InvoiceChange",
    "InvoiceFilter",
    "InvoicePage",
    "Keep",
    "Timeline",
    "dunning_runtime",
]
