"""Group commit for SQLite: units of work that threads submit at the same time share one
transaction, so one fsync makes a whole group durable instead of one each.

A commit at `synchronous=FULL` waits for the disk (an fsync of the WAL: from a fraction of a
millisecond to several on a busy machine). One transaction per request makes that wait the
ceiling of the API (at 5 ms, 200 requests/s whatever the CPU). Here the first thread to submit
a unit becomes the leader: it runs its unit and every unit queued meanwhile in one transaction
(each in a savepoint of its own, so one unit's failure undoes only its own writes), commits,
hands every submitter its own result or exception, and passes the lead to the first unit that
arrived during the commit. A unit's submitter gets its answer only once the transaction holding
it has committed: durability is the same as one transaction per unit. A thread submitting alone
runs its unit itself at once, as a plain transaction would.

A unit runs on the leader's thread, so it must only use the store that runs it (whose
connection is the leader's) and not depend on the thread it was submitted from.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from recoup.errors import StorageError

T = TypeVar("T")

MAX_GROUP = 64  # units per transaction: a bound on how long the lead holds the write lock


class Unit(Generic[T]):
    """One submitted unit of work and, once its group has committed, its outcome."""

    __slots__ = ("done", "error", "fn", "lead", "value")

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.done = threading.Event()  # set when finished, or when handed the lead
        self.lead = False
        self.value: T | None = None
        self.error: BaseException | None = None

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class GroupCommit:
    """Runs submitted units in groups through `run_group`, which executes a list of units in
    one transaction, setting each unit's `value` or `error` (it must not raise)."""

    def __init__(
        self, run_group: Callable[[Sequence[Unit[Any]]], None], *, max_group: int = MAX_GROUP
    ) -> None:
        self._run_group = run_group
        self._max_group = max_group
        self._mutex = threading.Lock()
        self._queue: list[Unit[Any]] = []
        self._leading = False

    @property
    def waiting(self) -> int:
        """Units submitted and not yet taken into a group."""
        with self._mutex:
            return len(self._queue)

    def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` in a transaction shared with the units submitted meanwhile; its result
        (or exception) once that transaction has committed (or failed)."""
        unit: Unit[T] = Unit(fn)
        with self._mutex:
            self._queue.append(unit)
            lead = not self._leading
            self._leading = True
        if not lead:
            unit.done.wait()
            lead = unit.lead  # handed the lead: its unit has not run yet
        if lead:
            self._lead()
        return unit.outcome()

    def _lead(self) -> None:
        with self._mutex:
            group = self._queue[: self._max_group]
            del self._queue[: self._max_group]
        successor: Unit[Any] | None = None
        try:
            self._run_group(group)
        finally:
            with self._mutex:
                if self._queue:
                    successor = self._queue[0]
                    successor.lead = True
                else:
                    self._leading = False
            for unit in group:
                unit.done.set()
            if successor is not None:
                successor.done.set()


def run_unit(conn: sqlite3.Connection, unit: Unit[Any]) -> None:
    """One unit of a group, in a savepoint: its outcome, or its error with its writes undone."""
    try:
        with savepoint(conn, "unit"):
            unit.value = unit.fn()
    except BaseException as exc:
        unit.error = exc
        if not conn.in_transaction:  # SQLite rolled the whole group back: it fails as one
            raise StorageError(f"SQLite: the transaction failed: {exc}") from exc


@contextmanager
def savepoint(conn: sqlite3.Connection, name: str) -> Iterator[None]:
    """A savepoint around the block: its writes are undone if it raises (the transaction
    goes on), kept in the transaction if it returns."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled the whole transaction back already
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")


__all__ = ["MAX_GROUP", "GroupCommit", "Unit", "run_unit", "savepoint"]
