"""`recoup gateway`: bad input is one line naming the option; the server really serves."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recoup.cli import main
from recoup.payments import ChargeStatus, GatewayClient, ProviderUnavailable
from tests.payments.conftest import make_request
from tests.support import free_socket

STARTUP_TIMEOUT = 20.0  # seconds: a cold interpreter on a busy 2-core machine
STOP_TIMEOUT = 10.0  # seconds


def test_a_missing_scenario_file_is_one_line_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gateway", "--scenarios", str(tmp_path / "nope.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: --scenarios") and "nope.toml" in err


def test_a_bad_scenario_file_names_the_option_and_the_path_inside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cards.toml"
    path.write_text('[cards.card_1]\ndecline_code = "insufficient_funds"\nwindow_days = 99\n')
    assert main(["gateway", "--scenarios", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--scenarios" in err and "cards.card_1.window_days" in err


def test_a_port_out_of_range_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gateway", "--port", "70000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--port" in err


def test_the_gateway_command_serves_charges_until_terminated(tmp_path: Path) -> None:
    cards = tmp_path / "cards.toml"
    cards.write_text('[cards.card_stolen]\ndecline_code = "stolen_card"\n')
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()  # a free port; the server binds it in a moment
    command = [sys.executable, "-m", "recoup", "gateway", "--port", str(port)]
    command += ["--seed", "7", "--scenarios", str(cards)]
    with (tmp_path / "gateway.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        with GatewayClient(f"http://127.0.0.1:{port}", timeout=5) as client:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while True:
                try:
                    client.stats()
                    break
                except ProviderUnavailable:
                    assert process.poll() is None, (tmp_path / "gateway.log").read_text()
                    assert time.monotonic() < deadline, "the gateway did not start"
                    time.sleep(0.05)
            charge = client.charge(make_request())
            assert charge.status is ChargeStatus.SUCCEEDED
            assert client.find_charge(charge.idempotency_key) == charge
            stolen = client.charge(make_request("k2", invoice_id="inv_2", card="card_stolen"))
            assert stolen.status is ChargeStatus.FAILED_TERMINAL
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT)
    # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught.
    assert process.returncode in (0, -signal.SIGTERM)
    log_text = (tmp_path / "gateway.log").read_text()
    assert f"simulated gateway on http://127.0.0.1:{port} (seed 7)" in log_text
    assert "Finished server process" in log_text
