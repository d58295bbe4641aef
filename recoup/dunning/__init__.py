"""Pure dunning: the decline taxonomy, retry policies, card-network limits and the planner.

No clock, no environment, no I/O beyond the data files shipped in this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recoup.lazy import lazy_getattr

# The exports load their modules on first use (`recoup.lazy`); `_HOMES` is the one list, which
# the TYPE_CHECKING imports and `__all__` repeat (tests/test_packaging.py holds them to it).
if TYPE_CHECKING:
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

_HOMES = {
    "AwaitCustomer": "recoup.dunning.outcomes",
    "Blackout": "recoup.dunning.policy",
    "CardAttempt": "recoup.dunning.limits",
    "Classification": "recoup.dunning.taxonomy",
    "DEFAULT_PRESET": "recoup.dunning.policy",
    "Decision": "recoup.dunning.outcomes",
    "DeclineClass": "recoup.dunning.taxonomy",
    "DunningPolicy": "recoup.dunning.policy",
    "Failure": "recoup.dunning.planner",
    "FinalAction": "recoup.dunning.policy",
    "Gap": "recoup.dunning.policy",
    "GapUnit": "recoup.dunning.policy",
    "NetworkLimits": "recoup.dunning.policy",
    "NoRetry": "recoup.dunning.outcomes",
    "PRESETS": "recoup.dunning.policy",
    "PlannedAttempt": "recoup.dunning.outcomes",
    "Retry": "recoup.dunning.outcomes",
    "classify": "recoup.dunning.taxonomy",
    "decision_as_dict": "recoup.dunning.outcomes",
    "decision_kind": "recoup.dunning.outcomes",
    "default_taxonomy": "recoup.dunning.taxonomy",
    "idempotency_key": "recoup.dunning.outcomes",
    "job_name": "recoup.dunning.outcomes",
    "parse_policy": "recoup.dunning.policy",
    "plan_after_update": "recoup.dunning.planner",
    "plan_retries": "recoup.dunning.planner",
    "preset": "recoup.dunning.policy",
}
__getattr__ = lazy_getattr(__name__, _HOMES)

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
