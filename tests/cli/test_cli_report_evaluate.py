"""`recoup report --evaluate POLICY`, on each backend: a candidate policy's recovery estimated
from an adaptive tenant's logged decisions (self-normalised inverse propensity) beside the
logged policy's observed recovery; a log that cannot support it says why; a bad policy is one
line and exit 2."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from recoup.dunning.invoice import AttemptState
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.recovery.records import FailureReport
from recoup.recovery.service import Dunning
from recoup.timekeeping.clock import VirtualClock
from recoup.timekeeping.zones import to_local
from tests.cli.test_cli import run
from tests.storage.conftest import Backend, Store

START = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)  # a Tuesday, 10:00 in Chicago
NOW = "2026-08-01T00:00:00Z"
# One try, its slot drawn by Thompson sampling over priors too strong to move (a log of
# nearly uniform exploration among the static slot, 14:00 and 15:00).
ONE_TRY = """
name = "explorer"
gaps = [{ business_days = 1 }]
strategy = "adaptive"
[window]
start = "10:00"
jitter_minutes = 30
[adaptive]
hours_start = "14:00"
hours_end = "16:00"
shift_days = 0
exploration = 1.0
prior_strength = 100000
min_attempts = 0
holdout_share = 0
propensity_draws = 100
"""
# The candidate: the same single try, at 15:00 local, when every card of the log clears.
AFTERNOON = 'name = "afternoon"\ngaps = [{ business_days = 1 }]\n[window]\nstart = "15:00"\n'


def logged(store: Store, policy: str, count: int) -> None:
    """`count` invoices, each tried once by `policy`: a try at 15:00 local or later succeeds."""
    clock = VirtualClock(START)
    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    scheduler.default_tenant()
    dunning = Dunning(scheduler, store)
    dunning.configure("default", charge_url="http://127.0.0.1:9/c", policy_toml=policy)
    for n in range(count):
        invoice, _ = dunning.report_failure(
            "default",
            FailureReport(
                invoice_id=f"in-{n}",
                customer_id=f"cus-{n}",
                amount=1999,
                currency="usd",
                failed_at=START,
                timezone="America/Chicago",
                country="US",
                decline_code="insufficient_funds",
            ),
        )
        (attempt,) = invoice.attempts
        ok = to_local(attempt.at, "America/Chicago").hour >= 15
        dunning.report_outcome(
            "default",
            invoice.invoice_id,
            attempt.attempt,
            "succeeded" if ok else "failed",
            decline_code=None if ok else "insufficient_funds",
        )
        assert dunning.get("default", invoice.invoice_id).attempts[0].state in (
            AttemptState.SUCCEEDED,
            AttemptState.FAILED,
        )


def evaluate(
    backend: Backend, capsys: pytest.CaptureFixture[str], policy: str, *extra: str
) -> tuple[int, Any, str]:
    code, out, err = run(
        capsys, "report", *backend.db_args(), "--now", NOW, "--evaluate", policy, *extra
    )
    return code, (json.loads(out) if "--json" in extra and code == 0 else out), err


@pytest.mark.slow
def test_a_candidate_is_estimated_from_the_logged_propensities(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    logged(store, ONE_TRY, 150)
    candidate = tmp_path / "afternoon.toml"
    candidate.write_text(AFTERNOON, encoding="utf-8")
    code, found, _ = evaluate(backend, capsys, str(candidate), "--json")
    assert code == 0
    assert found["candidate"] == "afternoon" and found["invoices"] == 150
    assert found["decisions"] == 150 and found["exploring_decisions"] >= 30
    # The log tried three slots (the static 10:00, 14:00 and 15:00) and only 15:00 recovered.
    assert 0.2 < found["observed"]["rate"] < 0.5
    assert found["supported"], found["reasons"]
    assert found["overlapping"] >= 30
    # Every logged try at 15:00 recovered: the candidate's estimate is 100%.
    assert found["estimate"]["rate"] == 1.0
    assert found["estimate"]["low"] > found["observed"]["high"]
    code, text, _ = evaluate(backend, capsys, str(candidate))
    assert code == 0
    assert "candidate, estimated:    100.0% recovered" in text
    assert "logged policy, observed:" in text and "cannot support" not in text


def test_a_log_without_exploration_cannot_support_a_different_candidate(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    logged(store, ONE_TRY.replace("exploration = 1.0", "exploration = 0.0"), 40)
    candidate = tmp_path / "afternoon.toml"
    candidate.write_text(AFTERNOON, encoding="utf-8")
    code, found, _ = evaluate(backend, capsys, str(candidate), "--json")
    assert code == 0 and not found["supported"]
    assert any(r.startswith("no exploration") for r in found["reasons"])


def test_a_static_log_holds_no_decision_and_a_bad_policy_is_exit_2(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    logged(store, 'name = "plain"\ngaps = [{ business_days = 1 }]\n', 10)
    code, found, _ = evaluate(backend, capsys, "adaptive", "--json")
    assert code == 0 and not found["supported"] and found["estimate"] is None
    assert "no timing decision" in found["reasons"][0]
    bad = tmp_path / "bad.toml"
    bad.write_text("gaps = 'soon'\n", encoding="utf-8")
    code, _, err = evaluate(backend, capsys, str(bad))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--evaluate" in err
