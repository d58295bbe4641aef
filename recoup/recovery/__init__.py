"""The dunning runtime: the only place that joins the dunning core (what to do) and the jobs
(doing it later, once). Failures in; attempts, cancellations and events out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recoup.lazy import lazy_getattr

# The exports load their modules on first use (`recoup.lazy`); `_HOMES` is the one list, which
# the TYPE_CHECKING imports and `__all__` repeat (tests/test_packaging.py holds them to it).
if TYPE_CHECKING:
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

_HOMES = {
    "AttemptRunner": "recoup.recovery.attempts",
    "Dunning": "recoup.recovery.service",
    "DunningSettings": "recoup.recovery.store",
    "DunningStore": "recoup.recovery.store",
    "FailureReport": "recoup.recovery.records",
    "InvoiceChange": "recoup.recovery.store",
    "InvoiceFilter": "recoup.recovery.store",
    "InvoicePage": "recoup.recovery.store",
    "KEEP": "recoup.recovery.records",
    "Keep": "recoup.recovery.records",
    "Timeline": "recoup.recovery.records",
    "dunning_runtime": "recoup.recovery.runtime",
}
__getattr__ = lazy_getattr(__name__, _HOMES)

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
