"""The dunning guide's end-to-end run (docs/dunning.md, "Test clocks"), as a user starts
it: `recoup serve` on a test clock, the example billing app, and `simulate.py`, which hands a
batch of failed charges to Recoup and advances the clock three weeks. Every invoice ends
recovered or exhausted, with zero double charges.
Real processes on loopback; every wait has a deadline."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest

from tests.support import free_socket

pytestmark = pytest.mark.slow

DEADLINE = 60.0  # seconds


class Processes:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.running: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []

    def start(self, name: str, *argv: str) -> None:
        log = (self.tmp / f"{name}.log").open("wb")
        self.running.append((subprocess.Popen(argv, stdout=log, stderr=log), log))

    def stop(self) -> None:
        for process, log in self.running:
            process.terminate()
            try:
                process.wait(DEADLINE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(DEADLINE)
            log.close()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    found = Processes(tmp_path)
    yield found
    found.stop()


def free_port() -> int:
    sock = free_socket()
    port: int = sock.getsockname()[1]
    sock.close()
    return port


def wait_for(url: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                pytest.fail(f"{url} did not come up")
            time.sleep(0.05)


def test_the_example_app_and_a_test_clock_recover_a_batch_with_no_double_charge(
    processes: Processes, tmp_path: Path
) -> None:
    recoup = [sys.executable, "-m", "recoup"]
    db = f"sqlite:///{tmp_path / 'recoup.db'}"
    created = subprocess.run(
        [*recoup, "tenants", "create", "acme", "--db", db, "--json"],
        check=True,
        capture_output=True,
        timeout=DEADLINE,
    )
    tenant = json.loads(created.stdout)
    recoup_port, billing_port = free_port(), free_port()
    processes.start(
        "recoup",
        *recoup,
        "serve",
        "--db",
        db,
        "--port",
        str(recoup_port),
        "--clock",
        "virtual:2026-12-01T00:00:00Z",
        "--allow-private-targets",
    )
    processes.start(
        "billing",
        sys.executable,
        "-m",
        "examples.billing_app",
        "--port",
        str(billing_port),
        "--secret",
        tenant["signing_secret"],
        "--db",
        str(tmp_path / "billing.db"),
    )
    wait_for(f"http://127.0.0.1:{recoup_port}/healthz")
    wait_for(f"http://127.0.0.1:{billing_port}/")
    simulated = subprocess.run(
        [
            sys.executable,
            "-m",
            "examples.billing_app.simulate",
            "--billing-url",
            f"http://127.0.0.1:{billing_port}",
            "--recoup-url",
            f"http://127.0.0.1:{recoup_port}",
            "--token",
            tenant["token"],
            "--invoices",
            "12",
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
    )
    assert simulated.returncode == 0, simulated.stdout + simulated.stderr
    out = simulated.stdout
    assert "double charges at the gateway: 0" in out, out
    recovered = int(out.split("recovered: ")[1].split(" of ")[0])
    assert recovered >= 6, out  # soft declines clear, expired cards get updated
    # Recoup's view agrees: no invoice is left retrying, and its timeline shows the events.
    auth = {"Authorization": f"Bearer {tenant['token']}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{recoup_port}", headers=auth) as http:
        page = http.get("/v1/dunning/invoices", params={"limit": 100}).json()
        states = [i["state"] for i in page["invoices"]]
        assert len(states) == 12 and "retrying" not in states
        assert states.count("recovered") == recovered
