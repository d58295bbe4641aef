"""The chaos run, bounded (bench/chaos at a few hundred failures): the API and two workers
as processes on one database, workers killed with SIGKILL every couple of seconds, the
gateway down for two seconds and, on PostgreSQL, every Recoup connection terminated twice
(and, on a server of the run's own, the server crashed and started again); then every
invariant must hold. The run's figures are in the failure message."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bench.chaos.own_server import NoServerBinaries, find_bindir
from bench.chaos.report import render
from bench.chaos.run import ChaosOptions, run_chaos

pytestmark = pytest.mark.slow


def bounded(backend: str, log_dir: Path, **more: Any) -> ChaosOptions:
    return ChaosOptions(
        backend=backend,
        failures=300,
        duration=12.0,
        seed=11,
        drain_timeout=25.0,
        kill_every=(1.5, 3.0),
        outage_seconds=2.0,
        log_dir=log_dir,
        **more,
    )


def assert_every_invariant(options: ChaosOptions) -> None:
    result = run_chaos(options)
    report = render(result)
    failed = [c.name for c in result.checks if c.binding and not c.passed]
    assert not failed, report
    assert result.figures["failures_reported"] > 0, report
    assert result.figures["rescue"]["kills"] >= 2, report
    rescue = result.figures["rescue"]
    assert rescue["rescued"] == rescue["registered_when_killed"], report
    assert result.figures["gateway_outages_s"], report


def test_sqlite_keeps_every_invariant_through_the_chaos(tmp_path: Path) -> None:
    assert_every_invariant(bounded("sqlite", tmp_path))


@pytest.mark.postgres
def test_postgres_keeps_every_invariant_through_the_chaos(
    tmp_path: Path, postgres_url: str
) -> None:
    # The terminations themselves are a check of the run ("the chaos ran as planned").
    assert_every_invariant(bounded("postgres", tmp_path, postgres_url=postgres_url))


@pytest.mark.postgres
def test_postgres_keeps_every_invariant_through_a_database_crash_and_restart(
    tmp_path: Path,
) -> None:
    try:
        find_bindir()
    except NoServerBinaries as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    options = bounded("postgres", tmp_path, own_server=True, db_restarts=1)
    result = run_chaos(options)
    report = render(result)
    assert not [c.name for c in result.checks if c.binding and not c.passed], report
    assert len(result.figures["db_restarts_s"]) == 1, report
    assert result.figures["rescue"]["kills"] >= 2, report
