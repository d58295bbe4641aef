"""`recoup invoices show`, on each backend: an adaptive tenant's invoice with each attempt's
timing decision and its explanation, in text and as JSON; a static one's without; no such
invoice: exit 2."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from recoup.dunning.policy import preset_text
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.recovery.records import FailureReport
from recoup.recovery.service import Dunning
from recoup.timekeeping.clock import VirtualClock
from tests.cli.test_cli import run
from tests.storage.conftest import Backend, Store

START = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)


def planned(store: Store, policy: str, invoice_id: str) -> None:
    scheduler = Scheduler(store, clock=VirtualClock(START), ssrf=SsrfGuard(allow_private=True))
    scheduler.default_tenant()
    dunning = Dunning(scheduler, store)
    dunning.configure("default", charge_url="http://127.0.0.1:9/c", policy_toml=preset_text(policy))
    dunning.report_failure(
        "default",
        FailureReport(
            invoice_id=invoice_id,
            customer_id=f"cus-{invoice_id}",
            amount=1999,
            currency="usd",
            failed_at=START,
            timezone="America/Chicago",
            country="US",
            decline_code="insufficient_funds",
        ),
    )


def test_show_prints_each_attempts_timing_and_explanation(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    planned(store, "adaptive", "in-1")
    stored = store.get_invoice("default", "in-1")
    assert stored is not None and stored.attempts
    code, out, _ = run(capsys, "invoices", "show", "in-1", *backend.db_args(), "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["policy"] == "adaptive" and shown["state"] == "retrying"
    for row, attempt in zip(shown["attempts"], stored.attempts, strict=True):
        assert attempt.timing is not None
        assert row["timing"] == {**attempt.timing.as_dict(), "moved": attempt.timing.moved}
    code, out, _ = run(capsys, "invoices", "show", "in-1", *backend.db_args())
    assert code == 0
    for attempt in stored.attempts:
        assert attempt.timing is not None
        assert f"why: {attempt.timing.explanation}" in out
        assert f"attempt {attempt.attempt}: {attempt.at:%Y-%m-%d %H:%M} UTC" in out


def test_show_a_static_invoice_and_a_missing_one(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    planned(store, "business-days", "in-2")
    code, out, _ = run(capsys, "invoices", "show", "in-2", *backend.db_args(), "--json")
    assert code == 0 and all(a["timing"] is None for a in json.loads(out)["attempts"])
    code, out, _ = run(capsys, "invoices", "show", "in-2", *backend.db_args())
    assert code == 0 and "timing:" not in out
    code, _, err = run(capsys, "invoices", "show", "nope", *backend.db_args())
    assert code == 2 and err.strip() == "error: no invoice 'nope' in dunning"
