"""`recoup worker` as a real process: kill -9 mid-attempt loses no job, and another worker
hands it back within seconds; SIGTERM is graceful.

Every wait is on a condition with a generous deadline (`DEADLINE`): on a loaded 2-core machine a
worker takes seconds to start, and only a failing test ever waits the whole deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import pytest
from standardwebhooks import Webhook

from recoup.jobs.model import BackoffPolicy, HttpTarget, JobState, RunOutcome
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from tests.jobs.support import SECRET, Database, Receiver, Reply
from tests.support import wait_until

pytestmark = pytest.mark.slow

LEASE_SECONDS = "1.5"  # short, so a killed worker's job is rescued quickly
DEADLINE = 60.0  # seconds any one wait may take before the test fails


@dataclass
class WorkerProcess:
    """A `recoup worker` process. Its stderr goes to a file: an unread pipe fills up and then
    blocks the worker's logging (and the worker with it)."""

    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        """For failure messages: the exit status so far and everything the worker logged."""
        text = self.log.read_text(errors="replace")
        return f"worker exit status {self.process.poll()}; its stderr:\n{text}"

    def exit_status(self) -> int:
        try:
            return self.process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker did not exit within {DEADLINE:g} s; {self.output()}")


@pytest.fixture
def start_worker(database: Database, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []

    def start(*extra: str, lease: str = LEASE_SECONDS) -> WorkerProcess:
        command = [
            sys.executable,
            "-m",
            "recoup",
            "worker",
            *database.cli_args(),
            "--lease-seconds",
            lease,
            "--allow-private-targets",
            *extra,
        ]
        env = {k: v for k, v in os.environ.items() if k != "RECOUP_ALLOW_PRIVATE_TARGETS"}
        log = tmp_path / f"worker-{len(started)}.log"
        stderr = log.open("wb")
        process = subprocess.Popen(command, env=env, stderr=stderr)
        started.append((process, stderr))
        return WorkerProcess(process, log)

    yield start
    for process, stderr in started:
        if process.poll() is None:
            process.kill()
        process.wait(DEADLINE)
        stderr.close()


def test_kill_9_mid_attempt_loses_no_job_and_it_completes_once(
    jobstore: Any, receiver: Receiver, start_worker: Callable[..., WorkerProcess]
) -> None:
    receiver.reply(Reply(200, delay=30.0))  # the first delivery hangs until the worker dies
    scheduler = Scheduler(jobstore, ssrf=SsrfGuard(allow_private=True))
    job = scheduler.enqueue(
        HttpTarget(url=receiver.url, body={"invoice": "inv_9"}),
        retry=BackoffPolicy(max_attempts=5, min_backoff=timedelta(seconds=0.1)),
        timeout=timedelta(seconds=60),
    )
    first = start_worker()
    assert len(receiver.wait_for(1, timeout=DEADLINE)) == 1, first.output()
    first.process.send_signal(signal.SIGKILL)
    first.process.wait(DEADLINE)

    second = start_worker("--worker-id", "second")
    assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED, DEADLINE), (
        second.output()
    )
    second.process.send_signal(signal.SIGTERM)
    assert second.exit_status() == 0, second.output()

    runs = scheduler.runs(job.id)
    assert [r.outcome for r in runs] == [RunOutcome.LOST, RunOutcome.SUCCEEDED]
    assert runs[-1].worker_id == "second"
    # At-least-once delivery of one message: the receiver can deduplicate on webhook-id.
    assert len(receiver.requests) == 2
    assert {r.headers["webhook-id"] for r in receiver.requests} == {job.id}
    for request in receiver.requests:
        Webhook(SECRET).verify(request.body, request.headers)


def test_kill_9_hands_the_workers_jobs_back_within_seconds_not_after_its_lease(
    jobstore: Any,
    database: Database,
    receiver: Receiver,
    start_worker: Callable[..., WorkerProcess],
    record_property: Callable[[str, object], None],
) -> None:
    # ARCHITECTURE.md, 'Worker sessions': the killed worker's session ends with it; another
    # worker finds it dead and hands its job back long before the 30 s lease would expire.
    receiver.reply(Reply(200, delay=30.0))  # the first delivery hangs until the worker dies
    scheduler = Scheduler(jobstore, ssrf=SsrfGuard(allow_private=True))
    job = scheduler.enqueue(
        HttpTarget(url=receiver.url, body={"invoice": "inv_9"}),
        retry=BackoffPolicy(max_attempts=1),  # a lost attempt must not spend the only one
        timeout=timedelta(seconds=60),
    )
    doomed = start_worker("--worker-id", "doomed", lease="30")
    assert len(receiver.wait_for(1, timeout=DEADLINE)) == 1, doomed.output()
    with scheduler.running_worker(worker_id="observer"):
        killed = time.monotonic()
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait(DEADLINE)
        assert wait_until(lambda: bool(scheduler.runs(job.id)), DEADLINE)  # the lost run
        rescue = time.monotonic() - killed
        assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED, DEADLINE)
    print(f"kill -9 → rescue on {database.backend}: {rescue:.2f} s")
    record_property("kill_to_rescue_seconds", round(rescue, 3))
    assert rescue < 5.0  # and the lease was 30 s
    runs = scheduler.runs(job.id)
    assert [(r.attempt, r.outcome, r.worker_id) for r in runs] == [
        (1, RunOutcome.LOST, "doomed"),
        (2, RunOutcome.SUCCEEDED, "observer"),
    ]
    assert len(receiver.requests) == 2  # once more, and only once more
    assert scheduler.get(job.id).retry.max_attempts == 2


def test_sigterm_lets_the_running_attempt_finish_then_exits_cleanly(
    jobstore: Any, receiver: Receiver, start_worker: Callable[..., WorkerProcess]
) -> None:
    answer = threading.Event()
    receiver.reply(Reply(200, gate=answer))  # the attempt runs until the test lets it finish
    scheduler = Scheduler(jobstore, ssrf=SsrfGuard(allow_private=True))
    # Two due jobs and one slot: one attempt runs, the other job is claimed and waits for it.
    due = {scheduler.enqueue(HttpTarget(url=receiver.url)).id for _ in range(2)}
    later = scheduler.enqueue(HttpTarget(url=receiver.url), delay=timedelta(hours=1))
    # A lease far longer than the test, so a starved heartbeat cannot lose the running job.
    worker = start_worker("--concurrency", "1", "--grace-seconds", "60", lease="60")
    requests = receiver.wait_for(1, timeout=DEADLINE)
    assert len(requests) == 1, worker.output()
    slow = requests[0].headers["webhook-id"]
    (waiting,) = due - {slow}
    # Claimed while the first attempt is in flight (aiohttp's request can reach the receiver
    # before the worker's next claim has committed: wait for it, do not race it).
    assert wait_until(lambda: scheduler.get(waiting).state is JobState.RUNNING, DEADLINE)

    worker.process.send_signal(signal.SIGTERM)
    # It releases what has not started, and waits for the attempt in flight.
    assert wait_until(lambda: scheduler.get(waiting).state is JobState.SCHEDULED, DEADLINE), (
        worker.output()
    )
    assert worker.process.poll() is None, worker.output()
    answer.set()
    assert worker.exit_status() == 0, worker.output()

    assert scheduler.get(slow).state is JobState.SUCCEEDED
    assert [r.outcome for r in scheduler.runs(slow)] == [RunOutcome.SUCCEEDED]
    assert scheduler.get(waiting).attempts == 0 and scheduler.runs(waiting) == []
    assert scheduler.get(later.id).state is JobState.SCHEDULED
    assert len(receiver.requests) == 1
    assert jobstore.workers() == []  # its session ended with it


def test_a_worker_alone_serves_its_attempt_metrics_with_metrics_port(
    jobstore: Any, receiver: Receiver, start_worker: Callable[..., WorkerProcess]
) -> None:
    import socket

    import httpx

    with socket.socket() as probe:  # a free port; the worker binds it a moment later
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    receiver.reply(Reply(200))
    scheduler = Scheduler(jobstore, ssrf=SsrfGuard(allow_private=True))
    job = scheduler.enqueue(HttpTarget(url=receiver.url))
    worker = start_worker("--metrics-port", str(port))
    assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED, DEADLINE), (
        worker.output()
    )

    def scraped() -> str:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        except httpx.TransportError:
            return ""

    # The completion is written before the hook runs: wait for the counter, not the state.
    assert wait_until(
        lambda: 'recoup_attempts_total{outcome="succeeded",tenant="default"} 1.0' in scraped(),
        DEADLINE,
    ), worker.output()
    text = scraped()
    assert 'recoup_firing_lag_seconds_count{tenant="default"} 1.0' in text
    assert "recoup_jobs_due 0.0" in text
    assert 'recoup_jobs{state="succeeded"} 1.0' in text
    worker.process.send_signal(signal.SIGTERM)
    assert worker.exit_status() == 0, worker.output()


@pytest.mark.parametrize("processes", ["1", "2"])
def test_stop_when_idle_delivers_everything_due_then_exits_0(
    jobstore: Any,
    receiver: Receiver,
    start_worker: Callable[..., WorkerProcess],
    processes: str,
) -> None:
    receiver.reply(Reply(200))
    scheduler = Scheduler(jobstore, ssrf=SsrfGuard(allow_private=True))
    due = [scheduler.enqueue(HttpTarget(url=receiver.url, body={"n": n})) for n in range(40)]
    later = scheduler.enqueue(HttpTarget(url=receiver.url), delay=timedelta(hours=1))
    worker = start_worker("--stop-when-idle", "--processes", processes)
    assert worker.exit_status() == 0, worker.output()
    assert {scheduler.get(job.id).state for job in due} == {JobState.SUCCEEDED}, worker.output()
    assert len(receiver.requests) == len(due)
    assert scheduler.get(later.id).state is JobState.SCHEDULED
