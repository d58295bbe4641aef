"""`recoup worker` killed with SIGKILL in the middle of a charge attempt: the attempt runs
again under the same keys, the charge endpoint finds the charge the first try made, and the
customer is charged exactly once. On both backends, with a real worker process and a real
charge endpoint on loopback; every wait has a deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pytest

from recoup.dunning.invoice import InvoiceState
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.payments import Scenario, SimulatedGateway
from recoup.recovery.records import FailureReport
from recoup.recovery.service import Dunning
from recoup.timekeeping.clock import SystemClock
from tests.jobs.conftest import database  # noqa: F401  (the per-backend fixture)
from tests.jobs.support import Database
from tests.recovery.conftest import ChargeSide
from tests.support import ServerThread, wait_until

pytestmark = pytest.mark.slow

DEADLINE = 60.0  # seconds any one wait may take before the test fails


@pytest.fixture
def start_worker(
    database: Database,  # noqa: F811
    tmp_path: Path,
) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    started: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []

    def start() -> subprocess.Popen[bytes]:
        command = [
            sys.executable,
            "-m",
            "recoup",
            "worker",
            *database.cli_args(),
            "--lease-seconds",
            "1.5",
            "--allow-private-targets",
        ]
        # stderr to a file: an unread pipe fills up and blocks the worker's logging.
        log = (tmp_path / f"worker-{len(started)}.log").open("wb")
        started.append((subprocess.Popen(command, env=dict(os.environ), stderr=log), log))
        return started[-1][0]

    yield start
    for process, log in started:
        if process.poll() is None:
            process.kill()
            process.wait(DEADLINE)
        log.close()


def test_kill_9_during_an_attempt_charges_exactly_once(
    database: Database,  # noqa: F811
    start_worker: Callable[[], subprocess.Popen[bytes]],
) -> None:
    store: Any = database.open()
    clock = SystemClock()
    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    secret = scheduler.default_tenant().signing_secret
    gateway = SimulatedGateway(clock, sleep=lambda s: None)
    gateway.add_card("fp_exp", Scenario.expired())
    side = ChargeSide(gateway=gateway, secret=lambda: secret, cards={"inv_1": "fp_exp"})
    arrived, release = threading.Event(), threading.Event()

    def hold_first(data: dict[str, Any]) -> None:
        if not arrived.is_set():
            arrived.set()
            release.wait(DEADLINE)  # the worker is killed while this request is in flight

    side.before_charge = hold_first
    with ServerThread(side.app()) as endpoint:  # type: ignore[arg-type]
        dunning = Dunning(scheduler, store)
        dunning.configure(
            "default", policy_toml=None, event_url=None, charge_url=f"{endpoint.url}/charge"
        )
        # An expired card and then a card update: one prompt attempt, due now in real time.
        dunning.report_failure(
            "default",
            FailureReport(
                invoice_id="inv_1",
                customer_id="cus_1",
                amount=1999,
                currency="usd",
                failed_at=datetime.now(UTC) - timedelta(hours=1),
                timezone="Europe/Paris",
                decline_code="expired_card",
                card_fingerprint="fp_exp",
                card_network="visa",
            ),
        )
        gateway.update_card("fp_exp")
        dunning.payment_method_updated("default", "inv_1")

        first = start_worker()
        assert wait_until(arrived.is_set, DEADLINE), "no first charge request"
        first.send_signal(signal.SIGKILL)
        first.wait(DEADLINE)
        release.set()  # the endpoint charges; nobody hears its answer
        assert wait_until(lambda: gateway.total_charged("inv_1") > 0, DEADLINE), "no charge"

        start_worker()
        assert wait_until(
            lambda: dunning.get("default", "inv_1").state is InvoiceState.RECOVERED, DEADLINE
        ), "the restarted worker did not recover the invoice"
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}
    assert gateway.double_charged_invoices() == []
    assert [r["attempt"] for r in side.requests] == [1, 1]
    job_id = dunning.get("default", "inv_1").attempts[0].job_id
    # The invoice changes inside the attempt; its run is logged when the attempt ends.
    assert wait_until(lambda: len(store.runs("default", job_id)) == 2, DEADLINE), "no 2nd run"
    assert [r.outcome.value for r in store.runs("default", job_id)] == ["lost", "succeeded"]
