"""The lock a write transaction on a SQLite file takes before its `BEGIN IMMEDIATE`: first one
of this process's (its threads queue on it, each woken the moment the one before is done),
then one that every Recoup process on the file shares (`flock` on a file beside it, named
`<database>-writer`).

Without the second, writers of two processes meet at SQLite's own lock, whose busy handler
sleeps 1, 2, 5 … 100 ms between tries: with `recoup serve --processes 2` on one file, the p99
of a job's creation was 855 ms. A writer waiting here tries again after 50 µs, doubling up to
1 ms, so it starts within about a millisecond of the lock's release, and gives up at the
same timeout as SQLite's busy handler would. A process that is not Recoup's (the sqlite3
shell) still meets Recoup's writers at SQLite's lock, as before; where the file cannot be
made (a read-only directory), SQLite's lock alone serialises the processes, as before.

Re-entrant on one thread, as the transaction code needs (a nested write fails in SQLite,
refused as a nested BEGIN, rather than deadlocking here); the file is locked once however deep
the nesting. A forked process starts with every lock of its own, free: its parent's thread
lock may be held by the thread that forked (whose identity the child's thread shares), and a
lock on a descriptor shared across a fork would be one lock for both.
"""

from __future__ import annotations

import os
import threading
import time
import weakref

try:
    import fcntl
except ImportError:  # no flock (Windows): SQLite's own lock serialises the processes
    fcntl = None  # type: ignore[assignment]

FIRST_WAIT = 0.00005  # seconds before a waiting writer tries the file's lock again
LONGEST_WAIT = 0.001
SUFFIX = "-writer"


class WriterLock:
    """The write lock of one database file in this process (one per path: `for_path`)."""

    def __init__(self, database: str) -> None:
        self.path = database + SUFFIX
        self._fresh()
        _EVERY.add(self)

    def _fresh(self) -> None:
        """Free, with nothing opened: at creation, and in a forked process."""
        self._threads = threading.RLock()
        self._depth = 0  # how many times the holding thread holds it (under `_threads`)
        self._fd: int | None = None
        self._opened = False

    def acquire(self, timeout: float) -> bool:
        """True once this thread holds both locks; False after `timeout` seconds without."""
        deadline = time.monotonic() + timeout
        if not self._threads.acquire(timeout=timeout):
            return False
        if self._depth == 0 and not self._lock_file(deadline):
            self._threads.release()
            return False
        self._depth += 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._threads.release()

    def _lock_file(self, deadline: float) -> bool:
        fd = self._descriptor()
        if fd is None:
            return True
        wait = FIRST_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                time.sleep(min(wait, left))
                wait = min(wait * 2, LONGEST_WAIT)

    def _descriptor(self) -> int | None:
        """This process's descriptor of the lock file, opened at first use; None where there
        is no flock or the file cannot be opened."""
        if fcntl is None or self._opened:
            return self._fd
        self._opened = True
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            self._fd = None
        return self._fd


_EVERY: weakref.WeakSet[WriterLock] = weakref.WeakSet()  # reset in a forked child
_LOCKS: dict[str, WriterLock] = {}
_LOCKS_GUARD = threading.Lock()


def for_path(database: str) -> WriterLock:
    """The one `WriterLock` of this process for the database at `database` (an absolute
    path), shared by every store open on it."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(database)
        if lock is None:
            lock = _LOCKS[database] = WriterLock(database)
        return lock


def _after_fork_in_child() -> None:
    for lock in list(_EVERY):
        inherited = lock._fd
        lock._fresh()
        if inherited is not None:
            # The parent's lock lasts while its own descriptor is open: closing this copy
            # leaves it held, as it must be.
            os.close(inherited)


os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["SUFFIX", "WriterLock", "for_path"]
