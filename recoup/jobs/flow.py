"""Flow control per key, the pure part: a job's limits (`flow_key` with a rate of N starts per
period and/or a parallelism of N running at once), checked as they are made, and the start
slots a claim reserves for a key's jobs (ARCHITECTURE.md, 'Flow control').

A job is under one key, which may carry both a rate and a parallelism (as QStash's
`Upstash-Flow-Control-Key` names one key with both); two keys on one job (a rate per gateway
and another per merchant at once) are refused, each edge saying so (ARCHITECTURE.md, 'Flow
control', "One key per job").

A rate is held as spacing: the starts of a key are at least `(period + START_TOLERANCE) / N`
apart, and a job may start no later than `START_TOLERANCE` after its slot (the worker gives a
later one back for a new slot), so N + 1 starts never fall within one period, however the
workers' timers jitter. Parallelism counts the key's jobs the store holds as running, claimed
ahead included, so the jobs actually running are never more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from recoup.errors import InvalidInput

# How late after its reserved slot a rate-limited job may still start; later, it is given back
# and claimed again for a new slot. Part of every slot's spacing (see the module docstring).
START_TOLERANCE = timedelta(milliseconds=25)
MAX_FLOW_RATE = 100_000
MAX_FLOW_PARALLELISM = 100_000
MAX_FLOW_PERIOD = timedelta(days=7)
DEFAULT_FLOW_PERIOD = timedelta(seconds=1)


def check_flow(
    key: str | None, rate: int | None, period: timedelta, parallelism: int | None
) -> None:
    """`InvalidInput` naming the field for limits that cannot hold: a key of 1–200
    characters with a rate and/or a parallelism; limits without a key."""
    if key is None:
        if rate is not None or parallelism is not None:
            field = "flow_rate" if rate is not None else "flow_parallelism"
            raise InvalidInput(
                field, rate if rate is not None else parallelism, "expected a flow_key with it"
            )
        return
    if not 1 <= len(key) <= 200:
        raise InvalidInput("flow_key", key, "expected 1–200 characters")
    if rate is None and parallelism is None:
        raise InvalidInput("flow_key", key, "expected a flow_rate or a flow_parallelism with it")
    if rate is not None and not 1 <= rate <= MAX_FLOW_RATE:
        raise InvalidInput("flow_rate", rate, f"expected 1–{MAX_FLOW_RATE}")
    if parallelism is not None and not 1 <= parallelism <= MAX_FLOW_PARALLELISM:
        raise InvalidInput("flow_parallelism", parallelism, f"expected 1–{MAX_FLOW_PARALLELISM}")
    if not timedelta(0) < period <= MAX_FLOW_PERIOD:
        raise InvalidInput(
            "flow_period", period.total_seconds(), "expected more than 0 and at most 7 days"
        )


def check_ordering(ordering_key: str | None, flow_key: str | None, parallelism: int | None) -> None:
    """An ordering key is a flow key of parallelism 1: `InvalidInput` for one beside a
    `flow_key` or another parallelism."""
    if ordering_key is None:
        return
    if flow_key is not None:
        raise InvalidInput(
            "ordering_key",
            ordering_key,
            f"expected one key per job: flow_key {flow_key!r} or ordering_key, not both (an "
            "ordering key takes a rate of its own: give the flow under the same key)",
        )
    if parallelism not in (None, 1):
        raise InvalidInput(
            "flow_parallelism", parallelism, "expected none with an ordering_key (one at a time)"
        )


@dataclass(frozen=True, kw_only=True)
class FlowLimits:
    """A flow key and its limits as one value: what a schedule gives each job it fires."""

    key: str
    rate: int | None = None
    period: timedelta = DEFAULT_FLOW_PERIOD
    parallelism: int | None = None

    def __post_init__(self) -> None:
        check_flow(self.key, self.rate, self.period, self.parallelism)

    def job_fields(self) -> dict[str, Any]:
        """The `NewJob` keywords."""
        return {
            "flow_key": self.key,
            "flow_rate": self.rate,
            "flow_period": self.period,
            "flow_parallelism": self.parallelism,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "rate": self.rate,
            "period_s": self.period.total_seconds(),
            "parallelism": self.parallelism,
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> FlowLimits:
        return cls(
            key=value["key"],
            rate=value.get("rate"),
            period=timedelta(seconds=value.get("period_s", 1.0)),
            parallelism=value.get("parallelism"),
        )


def spacing(rate: int, period: timedelta) -> timedelta:
    """The least time between two starts of a key limited to `rate` per `period`, rounded up
    to the microsecond (a `timedelta`'s resolution): rounded to the nearest, `rate` steps could
    span a microsecond less than `period + START_TOLERANCE`, and N + 1 starts fit a period."""
    return -(-(period + START_TOLERANCE) // rate)


def most_starts(
    *,
    now: datetime,
    until: datetime,
    next_start_at: datetime | None,
    rate: int | None,
    period: timedelta,
) -> int | None:
    """The most start slots `reserve` can give a key by `until` (None: no rate, no bound):
    slots begin at the later of `now` and the key's next free instant and are `spacing`
    apart. A claim reads no more of a key's line than this, so a throttled key's backlog
    costs a claim the few jobs the horizon can start, not a batch of rows it then leaves."""
    if rate is None:
        return None
    first = now if next_start_at is None else max(now, next_start_at)
    if first > until:
        return 0
    return (until - first) // spacing(rate, period) + 1


@dataclass(frozen=True, kw_only=True)
class Slots:
    """What a claim reserves for one key: a start instant per job taken (in due order), and
    the key's next free instant once they are taken."""

    starts: list[datetime]
    next_start_at: datetime | None


def reserve(
    due: Sequence[datetime],
    *,
    now: datetime,
    until: datetime,
    next_start_at: datetime | None,
    rate: int | None,
    period: timedelta,
    room: int,
) -> Slots:
    """Start slots for a key's due jobs (`due`: their run_at, in due order), at most `room`
    of them, none after `until` (the claim's horizon). Without a rate every job starts at its
    own instant; with one, each at the later of its instant and the key's next free one,
    which then moves on by `spacing`."""
    starts: list[datetime] = []
    step = None if rate is None else spacing(rate, period)
    free = next_start_at
    for run_at in due[: max(room, 0)]:
        start = max(run_at, now) if free is None else max(run_at, now, free)
        if start > until:
            break
        starts.append(start)
        if step is not None:
            free = start + step
    return Slots(starts=starts, next_start_at=free if step is not None else next_start_at)


__all__ = [
    "DEFAULT_FLOW_PERIOD",
    "MAX_FLOW_PARALLELISM",
    "MAX_FLOW_PERIOD",
    "MAX_FLOW_RATE",
    "START_TOLERANCE",
    "FlowLimits",
    "Slots",
    "check_flow",
    "check_ordering",
    "most_starts",
    "reserve",
    "spacing",
]
