"""The scheduler core: the job and run model, the store protocols, targets, backoff, the
worker, recurring schedules and the `Scheduler` Python API."""

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
