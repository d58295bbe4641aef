"""The OS processes of a chaos run: the API (`recoup serve --no-worker`) and two workers
(`recoup worker`) on one database. Workers are killed with SIGKILL and started again under a
new id (`w1.0`, `w1.1`, …), so each incarnation's runs and workers row are its own. Every
process is stopped on the way out, whatever happened (`Processes` is a context manager).

The billing app's process is `recoup.demo.billing_side.BillingApp`, reused as it is.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

START_TIMEOUT = 60.0  # seconds for the API to import, migrate and listen
STOP_TIMEOUT = 15.0  # seconds a process gets after SIGTERM before SIGKILL
WORKER_GRACE = 5.0  # seconds a stopping worker gives its running attempts
ROOT = Path(__file__).resolve().parents[2]  # the repository: `python -m` finds recoup there


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Proc:
    """One started process and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, *, kill: bool = False) -> None:
        if self.alive:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT)
        self.log.close()


@dataclass
class Processes:
    """The API and the workers of one run, on `db_args` (`--db URL`), logging to `log_dir`."""

    db_args: list[str]
    log_dir: Path
    api_url: str = ""
    workers: dict[str, Proc] = field(default_factory=dict)  # slot (w1, w2) → its incarnation
    incarnations: dict[str, int] = field(default_factory=dict)  # slot → incarnations started
    _api: Proc | None = None
    _all: list[Proc] = field(default_factory=list)

    def __enter__(self) -> Processes:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_all()

    def _spawn(self, name: str, args: list[str]) -> Proc:
        log = (self.log_dir / f"{name}.log").open("wb")
        # stderr to a file: an unread pipe fills up and blocks the process's logging.
        process = subprocess.Popen(
            [sys.executable, "-m", "recoup", *args],
            cwd=ROOT,
            env=dict(os.environ),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        proc = Proc(name=name, process=process, log=log)
        self._all.append(proc)
        return proc

    def start_api(self) -> str:
        port = free_port()
        args = ["serve", *self.db_args, "--no-worker", "--port", str(port)]
        self._api = self._spawn("api", [*args, "--allow-private-targets"])
        self.api_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not self._api.alive:
                raise RuntimeError(f"the API exited (see {self.log_dir / 'api.log'})")
            try:
                if httpx.get(f"{self.api_url}/healthz", timeout=1.0).status_code == 200:
                    return self.api_url
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"the API did not listen within {START_TIMEOUT:g} s")

    def start_worker(self, slot: str) -> str:
        """Start the slot's next incarnation; returns its worker id."""
        n = self.incarnations.get(slot, 0)
        self.incarnations[slot] = n + 1
        worker_id = f"{slot}.{n}"
        args = ["worker", *self.db_args, "--worker-id", worker_id, "--allow-private-targets"]
        # A graceful stop well inside STOP_TIMEOUT: an attempt still running then is given
        # back, not cut off by the SIGKILL that would follow.
        args += ["--grace-seconds", str(WORKER_GRACE)]
        self.workers[slot] = self._spawn(f"worker-{worker_id}", args)
        return worker_id

    def worker_id(self, slot: str) -> str:
        return f"{slot}.{self.incarnations[slot] - 1}"

    def kill_worker(self, slot: str) -> str:
        """SIGKILL the slot's running worker and reap it; returns its worker id."""
        proc = self.workers[slot]
        proc.process.send_signal(signal.SIGKILL)
        proc.process.wait(STOP_TIMEOUT)
        proc.log.close()
        return self.worker_id(slot)

    def workers_alive(self) -> list[str]:
        return [self.worker_id(slot) for slot, proc in self.workers.items() if proc.alive]

    def stop_workers(self) -> None:
        """SIGTERM the running workers and wait for them: they finish or give back what they
        hold and leave the workers table (a graceful shutdown)."""
        for proc in self.workers.values():
            proc.stop()

    def stop_all(self) -> None:
        """SIGTERM every process still running (workers first: they finish their attempts),
        SIGKILL any that does not stop in time."""
        for proc in [p for p in self._all if p is not self._api]:
            proc.stop()
        if self._api is not None:
            self._api.stop()


__all__ = ["ROOT", "Processes", "free_port"]
