"""The learner's counts: attempts and successes of a log of attempts per context level and
slot factor value (`adaptive.py`'s docstring gives the model that reads them), read-only as a
`LearnerState` or kept up to date one attempt at a time as `LearnerCounts`.

Pure: the log is an argument; no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from recoup.dunning.adaptive_slots import FACTORS, AttemptRecord, ContextKey, context_levels


@dataclass(frozen=True)
class Tally:
    successes: int = 0
    attempts: int = 0

    def plus(self, success: bool) -> Tally:
        return Tally(self.successes + int(success), self.attempts + 1)


# A count's key: a context key, then the factor's name and value ("all" and "static": None).
CountKey = tuple[ContextKey, str, int | str | None]


@dataclass(frozen=True)
class LearnerState:
    """Counts of attempts and successes per context level and factor value (read-only)."""

    counts: Mapping[CountKey, Tally] = field(default_factory=lambda: MappingProxyType({}))

    def tally(self, key: CountKey) -> Tally:
        return self.counts.get(key, Tally())

    def extended(self, records: Iterable[AttemptRecord]) -> LearnerState:
        """A new state with `records` counted too (this one unchanged)."""
        counts = LearnerCounts(dict(self.counts))
        for record in records:
            counts.add(record)
        return counts.state()


class LearnerCounts:
    """The counts of a `LearnerState`, kept up to date one attempt at a time (a shell that
    learns as answers come, such as the benchmark, without copying the counts each time)."""

    def __init__(self, counts: dict[CountKey, Tally] | None = None) -> None:
        self._counts: dict[CountKey, Tally] = {} if counts is None else counts

    def add(self, record: AttemptRecord) -> None:
        for level in context_levels(record.context):
            keys: list[CountKey] = [(level, "all", None)]
            keys += [(level, name, record.slot.factor(name)) for name in FACTORS]
            if record.static:
                keys.append((level, "static", None))
            for key in keys:
                self._counts[key] = self._counts.get(key, Tally()).plus(record.success)

    def state(self) -> LearnerState:
        """A read-only view of the counts as they are now, and as they will be: `add`
        changes it (copy it with `extended(())` to keep one)."""
        return LearnerState(MappingProxyType(self._counts))


def learner_state(records: Iterable[AttemptRecord]) -> LearnerState:
    """The state of a log of attempts (a pure function of the log: the same rows in any order
    give the same state)."""
    return LearnerState().extended(records)


__all__ = ["CountKey", "LearnerCounts", "LearnerState", "Tally", "learner_state"]
