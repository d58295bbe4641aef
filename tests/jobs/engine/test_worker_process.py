"""`recoup worker` as a real process: kill -9 mid-attempt loses no job; SIGTERM is graceful."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from standardwebhooks import Webhook

from recoup.jobs.model import HttpTarget, JobState, RetryPolicy, RunOutcome
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from tests.jobs.engine.support import SECRET, Database, Receiver, Reply

pytestmark = pytest.mark.slow

LEASE_SECONDS = "1.5"  # short, so a killed worker's job is rescued quickly


@pytest.fixture
def start_worker(database: Database) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*extra: str) -> subprocess.Popen[bytes]:
        command = [
            sys.executable,
            "-m",
            "recoup",
            "worker",
            *database.cli_args(),
            "--lease-seconds",
            LEASE_SECONDS,
            "--allow-private-targets",
            *extra,
        ]
        env = {k: v for k, v in os.environ.items() if k != "RECOUP_ALLOW_PRIVATE_TARGETS"}
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()


def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_kill_9_mid_attempt_loses_no_job_and_it_completes_once(
    jobstore: Any, receiver: Receiver, start_worker: Callable[..., subprocess.Popen[bytes]]
) -> None:
    receiver.reply(Reply(200, delay=30.0))  # the first delivery hangs until the worker dies
    scheduler = Scheduler(jobstore, ssrf=SsrfGuard(allow_private=True))
    job = scheduler.enqueue(
        HttpTarget(url=receiver.url, body={"invoice": "inv_9"}),
        retry=RetryPolicy(max_attempts=5, min_backoff=timedelta(seconds=0.1)),
        timeout=timedelta(seconds=60),
    )
    first = start_worker()
    assert len(receiver.wait_for(1, timeout=20)) == 1
    first.send_signal(signal.SIGKILL)
    first.wait(10)

    second = start_worker("--worker-id", "second")
    assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED, timeout=30)
    second.send_signal(signal.SIGTERM)
    assert second.wait(20) == 0

    runs = scheduler.runs(job.id)
    assert [r.outcome for r in runs] == [RunOutcome.LOST, RunOutcome.SUCCEEDED]
    assert runs[-1].worker_id == "second"
    # At-least-once delivery of one message: the receiver can deduplicate on webhook-id.
    assert len(receiver.requests) == 2
    assert {r.headers["webhook-id"] for r in receiver.requests} == {job.id}
    for request in receiver.requests:
        Webhook(SECRET).verify(request.body, request.headers)


def test_sigterm_lets_the_running_attempt_finish_then_exits_cleanly(
    jobstore: Any, receiver: Receiver, start_worker: Callable[..., subprocess.Popen[bytes]]
) -> None:
    receiver.reply(Reply(200, delay=1.5))
    scheduler = Scheduler(jobstore, ssrf=SsrfGuard(allow_private=True))
    slow = scheduler.enqueue(HttpTarget(url=receiver.url))
    later = scheduler.enqueue(HttpTarget(url=receiver.url), delay=timedelta(hours=1))
    worker = start_worker("--grace-seconds", "10")
    assert len(receiver.wait_for(1, timeout=20)) == 1
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(15) == 0
    assert scheduler.get(slow.id).state is JobState.SUCCEEDED
    assert [r.outcome for r in scheduler.runs(slow.id)] == [RunOutcome.SUCCEEDED]
    assert scheduler.get(later.id).state is JobState.SCHEDULED


def test_a_worker_alone_serves_its_attempt_metrics_with_metrics_port(
    jobstore: Any, receiver: Receiver, start_worker: Callable[..., subprocess.Popen[bytes]]
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
    assert wait_until(lambda: scheduler.get(job.id).state is JobState.SUCCEEDED, timeout=30)

    def scraped() -> str:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        except httpx.TransportError:
            return ""

    # The completion is written before the hook runs: wait for the counter, not the state.
    assert wait_until(lambda: 'recoup_attempts_total{outcome="succeeded"} 1.0' in scraped(), 10)
    text = scraped()
    assert "recoup_firing_lag_seconds_count 1.0" in text
    assert "recoup_jobs_due 0.0" in text
    assert 'recoup_jobs{state="succeeded"} 1.0' in text
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(15) == 0
