"""`recoup serve --processes 2` and `recoup worker --processes 2` as real processes: the two
servers listen on one port, jobs sent to it are delivered, and SIGTERM stops every process
gracefully with nothing lost (what was not delivered yet is still scheduled, and the workers
deliver it), on both backends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
import pytest

from recoup.jobs.model import JobState
from recoup.storage import open_api_tables
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
from tests.jobs.support import Database, Receiver, Reply
from tests.support import wait_until
from tests.support_smtp import free_port

pytestmark = pytest.mark.slow

DEADLINE = 90.0  # seconds any one wait may take on a loaded machine
JOBS = 40
LISTEN = "0A"  # the LISTEN state in /proc/net/tcp


def children_of(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def listeners(port: int) -> int:
    """How many sockets listen on `port` (over IPv4 and IPv6)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                local, state = fields[1], fields[3]
                count += int(local.rsplit(":", 1)[1], 16) == port and state == LISTEN
    return count


@dataclass
class Started:
    """The processes a test started, and their logs (stderr: a file each)."""

    tmp_path: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)

    def recoup(self, *args: str) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if k != "RECOUP_ALLOW_PRIVATE_TARGETS"}
        log = (self.tmp_path / f"process-{len(self.processes)}.log").open("wb")
        command = [sys.executable, "-m", "recoup", *args, "--log-level", "warning"]
        process = subprocess.Popen(command, env=env, stderr=log)
        self.processes.append(process)
        self.logs.append(log)
        return process

    def output(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.tmp_path.glob("process-*"))

    def stop(self, process: subprocess.Popen[bytes]) -> None:
        """SIGTERM, as a process manager stops it: every process ends, with exit code 0."""
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the processes did not stop within the deadline; {self.output()}")
        assert code == 0, self.output()


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Started]:
    found = Started(tmp_path)
    yield found
    for process in found.processes:
        if process.poll() is None:
            process.kill()
            process.wait()
    for log in found.logs:
        log.close()


def test_two_processes_serve_one_port_and_stop_gracefully_losing_nothing(
    database: Database, receiver: Receiver, started: Started
) -> None:
    store = database.open()
    now = SystemClock().now()
    store.ensure_tenant(new_tenant("acme", now=now))
    token = issue_token(open_api_tables(store), "acme", now=now).secret
    port = free_port()
    common = [*database.cli_args(), "--allow-private-targets", "--processes", "2"]
    server = started.recoup("serve", *common, "--no-worker", "--port", str(port))
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    assert wait_until(lambda: answers() and listeners(port) == 2, DEADLINE), started.output()
    assert len(children_of(server.pid)) == 2
    auth = {"Authorization": f"Bearer {token}"}
    for n in range(JOBS):
        # A connection each, so that the kernel spreads them over both processes.
        created = httpx.post(
            f"{url}/v1/jobs",
            json={"target": {"url": receiver.url}, "name": f"job-{n}", "delay_seconds": 0},
            headers={**auth, "Idempotency-Key": uuid.uuid4().hex},
            timeout=30.0,
        )
        assert created.status_code == 201, created.text
    started.stop(server)
    assert store.count_by_state("acme").get(JobState.SCHEDULED) == JOBS

    # Two workers, stopped while deliveries are in flight: each finishes its attempts.
    receiver.default = Reply(delay=0.3)
    workers = started.recoup("worker", *common, "--concurrency", "4")
    assert wait_until(lambda: len(children_of(workers.pid)) == 2, DEADLINE)
    assert wait_until(lambda: len(receiver.requests) >= 4, DEADLINE), started.output()
    started.stop(workers)
    states = store.count_by_state("acme")
    assert states.get(JobState.RUNNING, 0) == 0, states  # every claim finished or handed back
    assert sum(states.values()) == JOBS

    receiver.default = Reply()
    workers = started.recoup("worker", *common)

    def all_succeeded() -> bool:
        return store.count_by_state("acme").get(JobState.SUCCEEDED) == JOBS

    assert wait_until(all_succeeded, DEADLINE), started.output()
    started.stop(workers)
    delivered = {request.headers["webhook-id"] for request in receiver.requests}
    assert len(delivered) == JOBS
