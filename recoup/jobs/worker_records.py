"""What a store keeps of the workers that run its jobs: who runs a session (`WorkerInfo`,
`RegisteredWorker`), when a worker is dead (`SessionRules`), what a heartbeat found (`Beat`),
and the session a worker holds while it runs (`WorkerSession`). ARCHITECTURE.md, 'Worker
sessions'."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Protocol


@dataclass(frozen=True, kw_only=True)
class WorkerInfo:
    """Who runs a worker session: its id (what its leases name), host name and PID (for
    people), and `process_key` (`recoup.jobs.processes`: how a store on the same machine tells
    whether that process still runs; None where it cannot be known)."""

    id: str
    host: str
    pid: int
    process_key: str | None


@dataclass(frozen=True, kw_only=True)
class RegisteredWorker:
    """A worker session as the store holds it; instants from the database's clock."""

    id: str
    host: str
    pid: int
    process_key: str | None
    started_at: datetime
    heartbeat_at: datetime


@dataclass(frozen=True, kw_only=True)
class SessionRules:
    """When a worker is dead (ARCHITECTURE.md, 'Worker sessions'). Its heartbeat is stamped by
    the database's clock (elapsed time every worker shares, never the due clock).

    - `grace`: the database shows its session ended (PostgreSQL: its session lock is free)
      and its last heartbeat is older than this: time for a worker that lost its session but
      lives to notice and give its jobs up first.
    - `dead_after`: nothing shows its session alive or ended (SQLite, a process on another
      machine or in another PID namespace) and its last heartbeat is older than this.

    A worker proven alive (its lock held; its process seen running) is never dead: its jobs
    wait for their leases."""

    grace: timedelta
    dead_after: timedelta


class Beat(Enum):
    """What a worker session's heartbeat found."""

    ALIVE = "alive"  # stamped: the session holds
    # The session's connection is gone (PostgreSQL: its lock with it). Nobody may act on the
    # worker's jobs before its grace; re-opened within it, the session keeps them.
    LOST = "lost"
    GONE = "gone"  # the registration was deleted or taken over: give every job up now


class WorkerSession(Protocol):
    """A worker's registration, held while the worker runs (PostgreSQL: a connection holding
    its session lock). Every call blocks; the worker calls from its own thread."""

    @property
    def expires_after(self) -> timedelta:
        """How long after the last heartbeat observers may find this worker dead if its
        session ended (the rule that applies to this backend): the worker gives its jobs up
        sooner."""
        ...

    def beat(self) -> Beat:
        """Stamp the heartbeat (`Beat`). An exception proves nothing either way."""
        ...

    def hand_back(self, *, now: datetime) -> list[str]:
        """Hand back, as lost, every job still running under the worker's id (the worker gave
        them up while its session was down); return their ids."""
        ...

    def close(self) -> None:
        """End the session gracefully (the worker stopped, its jobs released or finished):
        delete the registration, close the connection."""
        ...

    def drop(self) -> None:
        """Let the session go without a word (after it was lost): close its connection."""
        ...


__all__ = ["Beat", "RegisteredWorker", "SessionRules", "WorkerInfo", "WorkerSession"]
