"""Recoup: a durable scheduler for work that must happen later and take effect once, and a
dunning engine for retrying failed payments on top of it.

The names a user starts with are here; each loads its module on first use, so `import recoup`
stays cheap (the command line starts fast, and no extra is needed until it is used):

    from recoup import Scheduler, open_store, PythonTarget
    scheduler = Scheduler(open_store("sqlite:///recoup.db"))

ARCHITECTURE.md is the map of the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recoup.lazy import lazy_getattr

__version__ = "0.1.0"

# The exported names are one list, `_HOMES` (each name → the module that defines it, imported
# on first use: `recoup.lazy`); the `TYPE_CHECKING` imports (for type checkers) and `__all__`
# repeat it, and tests/test_packaging.py holds them to it name for name and module for module.
if TYPE_CHECKING:
    from recoup.dunning.planner import Failure, plan_retries
    from recoup.dunning.policy import DunningPolicy, parse_policy, preset
    from recoup.errors import Conflict, InvalidInput, NotFound, RecoupError
    from recoup.jobs.handlers import HandlerContext, HandlerRegistry, PermanentError
    from recoup.jobs.model import BackoffPolicy, HttpTarget, PythonTarget
    from recoup.jobs.scheduler import Scheduler
    from recoup.recovery.records import FailureReport
    from recoup.recovery.runtime import dunning_runtime
    from recoup.recovery.service import Dunning
    from recoup.storage import open_store
    from recoup.timekeeping.clock import SystemClock, VirtualClock

_HOMES = {
    "BackoffPolicy": "recoup.jobs.model",
    "Conflict": "recoup.errors",
    "Dunning": "recoup.recovery.service",
    "DunningPolicy": "recoup.dunning.policy",
    "Failure": "recoup.dunning.planner",
    "FailureReport": "recoup.recovery.records",
    "HandlerContext": "recoup.jobs.handlers",
    "HandlerRegistry": "recoup.jobs.handlers",
    "HttpTarget": "recoup.jobs.model",
    "InvalidInput": "recoup.errors",
    "NotFound": "recoup.errors",
    "PermanentError": "recoup.jobs.handlers",
    "PythonTarget": "recoup.jobs.model",
    "RecoupError": "recoup.errors",
    "Scheduler": "recoup.jobs.scheduler",
    "SystemClock": "recoup.timekeeping.clock",
    "VirtualClock": "recoup.timekeeping.clock",
    "dunning_runtime": "recoup.recovery.runtime",
    "open_store": "recoup.storage",
    "parse_policy": "recoup.dunning.policy",
    "plan_retries": "recoup.dunning.planner",
    "preset": "recoup.dunning.policy",
}


__getattr__ = lazy_getattr(__name__, _HOMES)

__all__ = [
    "BackoffPolicy",
    "Conflict",
    "Dunning",
    "DunningPolicy",
    "Failure",
    "FailureReport",
    "HandlerContext",
    "HandlerRegistry",
    "HttpTarget",
    "InvalidInput",
    "NotFound",
    "PermanentError",
    "PythonTarget",
    "RecoupError",
    "Scheduler",
    "SystemClock",
    "VirtualClock",
    "__version__",
    "dunning_runtime",
    "open_store",
    "parse_policy",
    "plan_retries",
    "preset",
]
