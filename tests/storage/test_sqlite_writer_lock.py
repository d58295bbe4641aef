"""`recoup.storage.sqlite.writer_lock`: the processes on one SQLite file take turns at a lock
they share before `BEGIN IMMEDIATE`, re-entrant on one thread, honoured by a forked process,
given up at the timeout, and left out (SQLite's own lock serialising) where its file cannot
be made."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from recoup.errors import StorageError
from recoup.jobs.model import PythonTarget
from recoup.jobs.scheduler import Scheduler
from recoup.storage.sqlite.store import SqliteStore
from recoup.storage.sqlite.writer_lock import SUFFIX, WriterLock

HOLD = """
import fcntl, sys
lock = open(sys.argv[1], "a")
fcntl.flock(lock, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""


@contextmanager
def held_by_another_process(lock_file: str) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the file's lock until the block ends."""
    with subprocess.Popen(
        [sys.executable, "-c", HOLD, lock_file],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        try:
            assert holder.stdout.readline().strip() == "held"
            yield holder
        finally:
            holder.stdin.close()
            holder.wait(timeout=10)


def locked_elsewhere(lock_file: str) -> bool:
    """Whether some process holds the file's lock (tried from a process of its own)."""
    probe = (
        "import fcntl, sys\n"
        "f = open(sys.argv[1], 'a')\n"
        "try:\n"
        "    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except BlockingIOError:\n"
        "    sys.exit(1)\n"
    )
    return subprocess.run([sys.executable, "-c", probe, lock_file]).returncode == 1


def test_a_write_waits_for_another_processs_writer_and_starts_once_it_is_done(
    tmp_path: Path,
) -> None:
    database = tmp_path / "jobs.db"
    store = SqliteStore(database, busy_timeout=0.2)
    try:
        scheduler = Scheduler(store)
        scheduler.enqueue(PythonTarget(handler="noop"))  # the file and the tenant exist
        with held_by_another_process(str(database) + SUFFIX):
            began = time.monotonic()
            with pytest.raises(StorageError, match="locked"):
                scheduler.enqueue(PythonTarget(handler="noop"))
            assert time.monotonic() - began >= 0.2  # it waited its timeout, then gave up
        job = scheduler.enqueue(PythonTarget(handler="noop"))  # the lock is free again
        assert store.get(job.tenant, job.id) is not None
    finally:
        store.close()


def test_the_lock_is_re_entrant_on_one_thread_and_the_file_held_until_the_last_release(
    tmp_path: Path,
) -> None:
    lock = WriterLock(str(tmp_path / "jobs.db"))
    assert lock.acquire(timeout=1)
    assert lock.acquire(timeout=1)
    lock.release()
    assert locked_elsewhere(lock.path)
    lock.release()
    assert not locked_elsewhere(lock.path)


def test_a_forked_process_takes_the_lock_of_its_own_and_waits_for_its_parent(
    tmp_path: Path,
) -> None:
    lock = WriterLock(str(tmp_path / "jobs.db"))
    assert lock.acquire(timeout=1)
    try:
        child = os.fork()
        if child == 0:  # the child: the lock is its parent's, so it cannot take it
            code = 0 if not lock.acquire(timeout=0.05) else 3
            os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        lock.release()


def test_a_timeout_gives_up_and_leaves_the_lock_to_this_processs_other_threads(
    tmp_path: Path,
) -> None:
    lock = WriterLock(str(tmp_path / "jobs.db"))
    with held_by_another_process(lock.path):
        assert not lock.acquire(timeout=0.05)
    assert lock.acquire(timeout=1)  # neither the thread lock nor the file left held
    lock.release()


def test_where_the_lock_file_cannot_be_made_writes_still_go_through(tmp_path: Path) -> None:
    lock = WriterLock(str(tmp_path / "no such directory" / "jobs.db"))
    assert lock.acquire(timeout=1)
    lock.release()
    assert not Path(lock.path).exists()


def test_the_lock_file_lock_is_the_one_flock_sees(tmp_path: Path) -> None:
    lock = WriterLock(str(tmp_path / "jobs.db"))
    assert lock.acquire(timeout=1)
    try:
        with open(lock.path, "a") as other:  # another open file: another lock holder
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        lock.release()
