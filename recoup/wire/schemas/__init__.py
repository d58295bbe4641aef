"""Request and response models of the /v1 API, one module per resource (`common`, `jobs`,
`schedules`; /v1/dunning's are in `recoup.wire.dunning`, `recoup.wire.customers` and
`recoup.wire.dunning_settings`).

Requests are strict (`extra="forbid"`: an unknown or misspelt field is an error naming it, never
silently ignored; no string may hold NUL, which PostgreSQL cannot store, or a lone surrogate,
which no UTF-8 encoder can); responses are plain models so /openapi.json describes every body.
"""

from recoup.wire.schemas.common import (
    ExactlyOne,
    Health,
    Instant,
    LocalDateTime,
    Name,
    OutboundUrl,
    RetryIn,
    RetryOut,
    StrictModel,
    TargetIn,
    TargetOut,
    Text,
)
from recoup.wire.schemas.jobs import (
    MAX_DELAY_SECONDS,
    CancelIn,
    CancelledOut,
    JobIn,
    JobOut,
    JobPageOut,
    JobPatchIn,
    RunOut,
    RunsOut,
)
from recoup.wire.schemas.schedules import (
    AnchorIn,
    AnchorOut,
    ScheduleIn,
    ScheduleListOut,
    ScheduleOut,
    SchedulePatchIn,
    ScheduleState,
    UpcomingOut,
)

__all__ = [
    "MAX_DELAY_SECONDS",
    "AnchorIn",
    "AnchorOut",
    "CancelIn",
    "CancelledOut",
    "ExactlyOne",
    "Health",
    "Instant",
    "JobIn",
    "JobOut",
    "JobPageOut",
    "JobPatchIn",
    "LocalDateTime",
    "Name",
    "OutboundUrl",
    "RetryIn",
    "RetryOut",
    "RunOut",
    "RunsOut",
    "ScheduleIn",
    "ScheduleListOut",
    "ScheduleOut",
    "SchedulePatchIn",
    "ScheduleState",
    "StrictModel",
    "TargetIn",
    "TargetOut",
    "Text",
    "UpcomingOut",
]
