"""The scheduler core: the job and run model, the store protocols, targets, backoff, the
worker, recurring schedules and the `Scheduler` Python API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from recoup.lazy import lazy_getattr

# The exports load their modules on first use (`recoup.lazy`); `_HOMES` is the one list, which
# the TYPE_CHECKING imports and `__all__` repeat (tests/test_packaging.py holds them to it).
if TYPE_CHECKING:
    from recoup.jobs.handlers import HandlerContext, HandlerRegistry, PermanentError
    from recoup.jobs.model import (
        DEFAULT_TENANT,
        BackoffPolicy,
        Completion,
        HttpTarget,
        Job,
        JobState,
        NewJob,
        PythonTarget,
        Run,
        RunOutcome,
        Target,
        Tenant,
    )
    from recoup.jobs.scheduler import Scheduler
    from recoup.jobs.schedules.model import (
        AnchorRule,
        CronRule,
        MissedPolicy,
        NewSchedule,
        Rule,
        Schedule,
    )
    from recoup.jobs.ssrf import SsrfGuard, TargetRefused
    from recoup.jobs.store import JobStore, ScheduleStore
    from recoup.jobs.worker import Worker

_HOMES = {
    "AnchorRule": "recoup.jobs.schedules.model",
    "BackoffPolicy": "recoup.jobs.model",
    "Completion": "recoup.jobs.model",
    "CronRule": "recoup.jobs.schedules.model",
    "DEFAULT_TENANT": "recoup.jobs.model",
    "HandlerContext": "recoup.jobs.handlers",
    "HandlerRegistry": "recoup.jobs.handlers",
    "HttpTarget": "recoup.jobs.model",
    "Job": "recoup.jobs.model",
    "JobState": "recoup.jobs.model",
    "JobStore": "recoup.jobs.store",
    "MissedPolicy": "recoup.jobs.schedules.model",
    "NewJob": "recoup.jobs.model",
    "NewSchedule": "recoup.jobs.schedules.model",
    "PermanentError": "recoup.jobs.handlers",
    "PythonTarget": "recoup.jobs.model",
    "Rule": "recoup.jobs.schedules.model",
    "Run": "recoup.jobs.model",
    "RunOutcome": "recoup.jobs.model",
    "Schedule": "recoup.jobs.schedules.model",
    "ScheduleStore": "recoup.jobs.store",
    "Scheduler": "recoup.jobs.scheduler",
    "SsrfGuard": "recoup.jobs.ssrf",
    "Target": "recoup.jobs.model",
    "TargetRefused": "recoup.jobs.ssrf",
    "Tenant": "recoup.jobs.model",
    "Worker": "recoup.jobs.worker",
}
__getattr__ = lazy_getattr(__name__, _HOMES)

__all__ = [
    "DEFAULT_TENANT",
    "AnchorRule",
    "BackoffPolicy",
    "Completion",
    "CronRule",
    "HandlerContext",
    "HandlerRegistry",
    "HttpTarget",
    "Job",
    "JobState",
    "JobStore",
    "MissedPolicy",
    "NewJob",
    "NewSchedule",
    "PermanentError",
    "PythonTarget",
    "Rule",
    "Run",
    "RunOutcome",
    "Schedule",
    "ScheduleStore",
    "Scheduler",
    "SsrfGuard",
    "Target",
    "TargetRefused",
    "Tenant",
    "Worker",
]
