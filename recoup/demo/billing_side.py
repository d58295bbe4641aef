"""The other side of the demo: the example billing app (`examples/billing_app`) in a process of
its own, charging an in-process simulated gateway that knows the demo's cards and faults.

    python -m recoup.demo.billing_side --seed 7 --size 1000 --db billing.db [--scenarios F]

reads the tenant's signing secret from RECOUP_SIGNING_SECRET, builds the same customers as the
demo (`population.generate`), gives the gateway each card's scenario and each injected fault
(and, with `--scenarios`, the file's world, whose odds the customers' soft declines follow),
listens on a free port of 127.0.0.1 and prints `{"port": N}` on one line once it accepts
connections. `BillingApp` starts and stops it from the demo.

A process of its own: Recoup and the billing app then run on two cores, and the charge
requests cross a real socket, as in production.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING

from recoup.errors import RecoupError
from recoup.timekeeping.clock import SystemClock

if TYPE_CHECKING:
    from recoup.payments.world import World

SECRET_ENV = "RECOUP_SIGNING_SECRET"
START_TIMEOUT = 60.0  # seconds for the app to import and listen
STOP_TIMEOUT = 10.0


class BillingAppError(RecoupError):
    """The billing app could not be started (its log says why)."""


class BillingApp:
    """The billing app's process, for a `with` block that starts it; `wait_ready()` waits
    until it listens (do other work meanwhile: it takes a second or two to import) and
    returns its URL."""

    def __init__(
        self,
        *,
        seed: int,
        size: int,
        db_path: Path,
        secret: str,
        log_path: Path,
        scenarios: Path | None = None,
    ):
        self.seed, self.size, self.db_path, self.secret = seed, size, db_path, secret
        self.log_path, self.scenarios = log_path, scenarios
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> BillingApp:
        self._log = self.log_path.open("wb")
        argv = [sys.executable, "-m", "recoup.demo.billing_side"]
        argv += ["--seed", str(self.seed), "--size", str(self.size), "--db", str(self.db_path)]
        if self.scenarios is not None:
            argv += ["--scenarios", str(self.scenarios)]
        self._process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, SECRET_ENV: self.secret},
        )
        return self

    def wait_ready(self) -> str:
        assert self._process is not None, "start it with `with`"
        self.url = f"http://127.0.0.1:{self._read_port(self._process)}"
        return self.url

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _read_port(self, process: subprocess.Popen[bytes]) -> int:
        assert process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], 0.1)
            if ready:
                line = process.stdout.readline()
                if line:
                    return int(json.loads(line)["port"])
            if process.poll() is not None:
                break
        raise BillingAppError(
            f"the example billing app did not start (see {self.log_path})"
            + (": " + _last_line(self.log_path) if self.log_path.exists() else "")
        )

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT)
        if process is not None and process.stdout is not None:
            process.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def scenario_world(path: Path) -> World:
    """The world of a scenario file (the packaged default when it names none)."""
    from recoup.payments.wire import parse_scenario_file
    from recoup.payments.world import packaged_world

    return parse_scenario_file(path.read_text("utf-8")).world or packaged_world()


def main(argv: list[str] | None = None) -> None:
    """The billing app's process (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m recoup.demo.billing_side")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--scenarios", default=None)
    args = parser.parse_args(argv)
    secret = os.environ.get(SECRET_ENV)
    if not secret:
        parser.error(f"{SECRET_ENV} must hold the tenant's signing secret")

    import uvicorn

    from examples.billing_app.app import create_app
    from recoup.demo.population import generate
    from recoup.payments import SimulatedGateway

    world = None if args.scenarios is None else scenario_world(Path(args.scenarios))
    # The gateway's clock serves only calls without an instant: every charge carries its own.
    gateway = SimulatedGateway(SystemClock(), seed=args.seed, world=world)
    for customer in generate(args.seed, args.size, world_odds=world is not None):
        gateway.add_card(customer.card, customer.scenario())
        fault = customer.injected_fault()
        if fault is not None:
            gateway.inject(fault)
    # OFF: a throwaway database needs no fsync, neither per commit nor per checkpoint.
    app = create_app(db_path=args.db, secret=secret, provider=gateway, synchronous="OFF")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))

    class Announcing(uvicorn.Server):
        """Prints the port once the app accepts connections (the demo waits for that line)."""

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            sys.stdout.write(json.dumps({"port": sock.getsockname()[1]}) + "\n")
            sys.stdout.flush()

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    Announcing(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
