"""Who this process is, and whether a process it can see is still alive: the evidence a SQLite
store has that a worker on the same machine died (ARCHITECTURE.md, 'Worker sessions').

A process key is `boot:namespace:start`: the kernel's boot id, the PID namespace, and the
process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`). Two keys
with the same `boot:namespace` (the *scope*) name processes whose PIDs mean the same thing, so
one can look the other up in `/proc`: gone, a zombie, or a PID now held by a process that
started at another time all mean the process is dead. Where `/proc` is missing (not Linux, a
sandbox) the key is None and no process is ever judged by its PID.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

from recoup.jobs.worker_records import WorkerInfo

PROC = Path("/proc")


@functools.cache
def _scope() -> str | None:
    """`boot:namespace` of this process (the same for its whole life), or None."""
    try:
        boot = (PROC / "sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink(PROC / "self/ns/pid")  # 'pid:[4026531836]'
    except OSError:
        return None
    return f"{boot}:{namespace}"


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in ticks) of a process, or None if no process has that PID."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # `pid (comm) state ppid …`: comm may hold spaces and parentheses, so split after the last.
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def process_key(pid: int | None = None) -> str | None:
    """The key of process `pid` (default: this one), or None where it cannot be known."""
    scope = _scope()
    if scope is None:
        return None
    try:
        found = _stat(os.getpid() if pid is None else pid)
    except (OSError, ValueError, IndexError):
        return None
    return None if found is None else f"{scope}:{found[1]}"


def process_alive(pid: int, key: str | None) -> bool | None:
    """Whether the process registered as (`pid`, `key`) still runs: True, False, or None
    when this process cannot tell (another machine, boot or PID namespace; no key)."""
    scope = _scope()
    if key is None or scope is None:
        return None
    key_scope, _, start = key.rpartition(":")
    if key_scope != scope:
        return None
    try:
        found = _stat(pid)
    except (OSError, ValueError, IndexError):
        return None
    if found is None:
        return False
    state, started = found
    # A zombie has exited (its parent has not reaped it yet); another start time means the PID
    # was given to a new process since.
    return state not in ("Z", "X") and str(started) == start


def this_process(worker_id: str) -> WorkerInfo:
    """The session record of a worker run by this process."""
    return WorkerInfo(
        id=worker_id, host=socket.gethostname(), pid=os.getpid(), process_key=process_key()
    )


__all__ = ["process_alive", "process_key", "this_process"]
