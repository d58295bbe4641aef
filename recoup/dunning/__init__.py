"""Pure dunning: the decline taxonomy, retry policies, card-network limits and the planner.

No clock, no environment, no I/O beyond the data files shipped in this package.
"""

from recoup.dunning.limits import CardAttempt
from recoup.dunning.outcomes import (
    AwaitCustomer,
    Decision,
    NoRetry,
    PlannedAttempt,
    Retry,
    decision_as_dict,
    decision_kind,
    idempotency_key,
    job_name,
)
from recoup.dunning.planner import Failure, plan_after_update, plan_retries
from recoup.dunning.policy import (
    DEFAULT_PRESET,
    PRESETS,
    Blackout,
    DunningPolicy,
    FinalAction,
    Gap,
    GapUnit,
    NetworkLimits,
    parse_policy,
    preset,
)
from recoup.dunning.taxonomy import Classification, DeclineClass, classify, default_taxonomy

__all__ = [
    "DEFAULT_PRESET",
    "PRESETS",
    "AwaitCustomer",
    "Blackout",
    "CardAttempt",
    "Classification",
    "Decision",
    "DeclineClass",
    "DunningPolicy",
    "Failure",
    "FinalAction",
    "Gap",
    "GapUnit",
    "NetworkLimits",
    "NoRetry",
    "PlannedAttempt",
    "Retry",
    "classify",
    "decision_as_dict",
    "decision_kind",
    "default_taxonomy",
    "idempotency_key",
    "job_name",
    "parse_policy",
    "plan_after_update",
    "plan_retries",
    "preset",
]
