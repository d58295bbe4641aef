"""SQLite shared by several processes on one machine: claims stay exclusive."""

from __future__ import annotations

import gc
import multiprocessing
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recoup.jobs.model import NewJob, PythonTarget
from recoup.jobs.store import ClaimParams
from recoup.storage.sqlite.store import SqliteStore

T0 = datetime(2026, 3, 1, tzinfo=UTC)
JOBS = 600


def _claim_all(path: str, worker: str) -> list[str]:
    store = SqliteStore(path)
    claimed: list[str] = []
    try:
        while True:
            got = store.claim_due(
                ClaimParams(
                    worker_id=worker,
                    now=T0,
                    horizon=timedelta(0),
                    lease=timedelta(minutes=1),
                    limit=5,
                )
            )
            if not got:
                return claimed
            claimed.extend(job.id for job in got)
    finally:
        store.close()


@pytest.mark.slow
def test_worker_processes_sharing_a_file_never_claim_a_job_twice(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    store = SqliteStore(path)
    target = PythonTarget(handler="noop")
    store.insert_many(
        [NewJob(run_at=T0 - timedelta(seconds=i), target=target) for i in range(JOBS)], now=T0
    )
    store.close()
    # spawn: a fresh interpreter per worker, as separate `recoup worker` processes would be.
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        results = pool.starmap(_claim_all, [(path, f"p{i}") for i in range(4)])
    counts = Counter(job_id for claimed in results for job_id in claimed)
    assert len(counts) == JOBS
    assert set(counts.values()) == {1}


def test_a_waiter_in_another_process_is_woken_through_the_counter_row(tmp_path: Path) -> None:
    # Another process's insert reaches a waiter only through the counter row it bumps; the
    # test bumps the row directly, bypassing this process's in-process condition.
    path = tmp_path / "wake.db"
    waiter = SqliteStore(str(path))
    writer = SqliteStore(str(path))
    try:
        with writer.write() as conn:
            conn.execute("UPDATE wakeups SET seq = seq + 1 WHERE id = 1")
        assert waiter.wait_for_notify(0.01) is False  # the bump came before the wait began
        woke: list[bool] = []
        thread = threading.Thread(target=lambda: woke.append(waiter.wait_for_notify(60.0)))
        thread.start()
        # A bump before the waiter reads the counter goes unseen (as asserted above): bump
        # until one lands during the wait, however late the thread starts on a busy machine.
        deadline = time.monotonic() + 30.0
        while thread.is_alive() and time.monotonic() < deadline:
            with writer.write() as conn:
                conn.execute("UPDATE wakeups SET seq = seq + 1 WHERE id = 1")
            thread.join(0.2)
        thread.join(30.0)
        assert woke == [True]
    finally:
        waiter.close()
        writer.close()


def test_a_finished_threads_connection_is_closed(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "threads.db"))
    try:
        for _ in range(10):
            thread = threading.Thread(target=store.next_due_at)
            thread.start()
            thread.join()
        gc.collect()
        assert store.dialect.open_connections() == 1  # this thread's, opened to migrate
    finally:
        store.close()
