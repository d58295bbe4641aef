"""The example billing app (examples/billing_app): its charge endpoint driven with signed
requests as Recoup sends them, its start-up command, and simulate.py against a stand-in for
Recoup's HTTP API (the real Recoup side is tested elsewhere)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from examples.billing_app.app import CHARGE_PATH, create_app
from examples.billing_app.simulate import Options, run
from recoup.jobs.signing import signature_headers
from recoup.payments import Fault, FaultKind, GatewayClient, Scenario, SimulatedGateway
from recoup.timekeeping.clock import VirtualClock

from .conftest import NOW, SECRET, InProcess, body_of, in_process, later, signed

ROOT = Path(__file__).resolve().parents[2]
BILLING = "http://billing.test"


@pytest.fixture
def gateway() -> SimulatedGateway:
    return SimulatedGateway(VirtualClock(NOW), seed=5)


@pytest.fixture
def billing(tmp_path: Path, gateway: SimulatedGateway) -> httpx.Client:
    return in_process(
        create_app(
            db_path=tmp_path / "billing.db",
            secret=SECRET,
            provider=gateway,
            clock=VirtualClock(NOW),
        )
    )


def create_invoice(billing: httpx.Client, invoice_id: str = "inv_1", card: str = "card_1") -> Any:
    answer = billing.post(
        "/invoices",
        json={
            "id": invoice_id,
            "customer_id": "cus_1",
            "amount": 1999,
            "currency": "usd",
            "card_fingerprint": card,
            "charge_at": NOW.isoformat(),
        },
    )
    assert answer.status_code == 201, answer.text
    return answer.json()


def status_of(billing: httpx.Client, invoice_id: str = "inv_1") -> str:
    rows = billing.get("/invoices").json()["invoices"]
    return str(next(r["status"] for r in rows if r["id"] == invoice_id))


def retry(billing: httpx.Client, attempt: int = 2, **kwargs: Any) -> httpx.Response:
    body = body_of("inv_1", attempt, scheduled_at=later(attempt * 86_400))
    headers, raw = signed(body, **kwargs)
    return billing.post(CHARGE_PATH, content=raw, headers=headers)


def test_a_failed_invoice_is_recovered_by_a_signed_retry(
    billing: httpx.Client, gateway: SimulatedGateway
) -> None:
    gateway.add_card("card_1", Scenario.soft(clears_after=timedelta(days=1)))
    first = create_invoice(billing)
    assert first["status"] == "open"
    assert first["charge"]["decline_code"] == "insufficient_funds"

    answer = retry(billing, 2)
    assert answer.status_code == 200
    assert answer.json() == {"outcome": "succeeded", "decline_code": None, "advice_code": None}
    (row,) = billing.get("/invoices").json()["invoices"]
    assert row["status"] == "paid"
    assert row["paid_charge_id"] == gateway.successful_charges()[0].id
    # Recoup's duplicate trigger of the same attempt: the stored answer, no charge.
    again = retry(billing, 2)
    assert again.headers["idempotent-replayed"] == "true"
    assert len(gateway.successful_charges()) == 1


def test_an_invoice_paid_out_of_band_is_never_charged_by_a_later_retry(
    billing: httpx.Client, gateway: SimulatedGateway
) -> None:
    gateway.add_card("card_1", Scenario.soft(clears_after=timedelta(days=1)))
    create_invoice(billing)
    assert billing.post("/invoices/inv_1/paid").json() == {
        "id": "inv_1",
        "status": "paid",
        "changed": True,
    }
    assert billing.post("/invoices/inv_1/paid").json()["changed"] is False  # already paid
    assert billing.post("/invoices/inv_404/paid").status_code == 404
    # The card would go through now; the retry is answered already_handled, uncharged.
    assert retry(billing, 2).json()["outcome"] == "already_handled"
    assert gateway.successful_charges() == []
    assert status_of(billing) == "paid"


def test_a_hard_decline_is_reported_failed_with_its_codes(
    billing: httpx.Client, gateway: SimulatedGateway
) -> None:
    gateway.add_card("card_1", Scenario.hard("do_not_honor", advice_code="do_not_try_again"))
    create_invoice(billing)
    assert retry(billing, 2).json() == {
        "outcome": "failed",
        "decline_code": "do_not_honor",
        "advice_code": "do_not_try_again",
    }
    assert status_of(billing) == "open"


def test_an_invoice_already_paid_is_already_handled(
    billing: httpx.Client, gateway: SimulatedGateway
) -> None:
    create_invoice(billing)  # the first charge succeeds: every card does by default
    assert retry(billing, 2).json()["outcome"] == "already_handled"
    assert len(gateway.successful_charges()) == 1


def test_an_unsigned_or_stale_retry_is_refused(
    billing: httpx.Client, gateway: SimulatedGateway
) -> None:
    gateway.add_card("card_1", Scenario.hard())
    create_invoice(billing)
    _, raw = signed(body_of("inv_1", 2))  # the body, without its signature headers
    assert (
        billing.post(
            CHARGE_PATH, content=raw, headers={"Idempotency-Key": "retry:inv_1:2"}
        ).status_code
        == 401
    )
    assert retry(billing, 2, at=later(-3600)).status_code == 401
    assert gateway.stats().calls == 1  # only the first charge


def test_a_timed_out_retry_is_reconciled_on_the_next_ask(
    billing: httpx.Client, gateway: SimulatedGateway
) -> None:
    gateway.add_card("card_1", Scenario.soft(clears_after=timedelta(days=1)))
    create_invoice(billing)
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    assert retry(billing, 2).json()["outcome"] == "pending"
    assert retry(billing, 2).json()["outcome"] == "succeeded"
    assert gateway.charges_per_key()["charge:inv_1:2"] == 1
    assert gateway.double_charged_invoices() == []


def test_duplicate_deliveries_at_once_charge_once(
    billing: httpx.Client, gateway: SimulatedGateway
) -> None:
    gateway.add_card("card_1", Scenario.soft(clears_after=timedelta(days=1)))
    create_invoice(billing)
    answers: list[httpx.Response] = []
    threads = [threading.Thread(target=lambda: answers.append(retry(billing, 2))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(answers) == 3
    assert all(a.status_code in (200, 409) for a in answers)
    assert retry(billing, 2).json()["outcome"] == "succeeded"
    assert len(gateway.successful_charges()) == 1


def test_the_app_starts_from_the_repository_root() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "examples.billing_app", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "--gateway-url" in result.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "examples.billing_app"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": ""},
    )
    assert missing.returncode == 2
    assert "--secret" in missing.stderr


class StandInRecoup:
    """Just enough of Recoup's API for simulate.py: failures in, a test clock that retries
    each open invoice once a day (up to three attempts) by calling its charge endpoint with
    signed requests, payment-method updates, and invoice states."""

    def __init__(self, billing: httpx.Client) -> None:
        self.now = NOW
        self.billing = billing
        self.failures: dict[str, dict[str, Any]] = {}
        self.app = FastAPI()
        app = self.app

        @app.get("/v1/clock")
        def clock() -> dict[str, str]:
            return {"now": self.now.isoformat()}

        @app.post("/v1/dunning/failures", status_code=201)
        def failure(body: dict[str, Any]) -> dict[str, str]:
            hard = body["decline_code"] == "stolen_card"
            waits = body["decline_code"] == "expired_card"
            state = "exhausted" if hard else ("awaiting_customer" if waits else "retrying")
            self.failures[body["invoice_id"]] = {**body, "attempt": 0, "state": state}
            return {"invoice_id": body["invoice_id"]}

        @app.post("/v1/dunning/invoices/{invoice_id}/payment-method-updated")
        def updated(invoice_id: str) -> dict[str, str]:
            self.failures[invoice_id]["state"] = "retrying"
            return {"invoice_id": invoice_id}

        @app.get("/v1/dunning/invoices/{invoice_id}")
        def invoice(invoice_id: str) -> dict[str, str]:
            return {"state": self.failures[invoice_id]["state"]}

        @app.post("/v1/clock")
        def advance(body: dict[str, int]) -> dict[str, str]:
            self.now += timedelta(seconds=body["advance_seconds"])
            for found in self.failures.values():
                if found["state"] == "retrying":
                    self.retry(found)
            return {"now": self.now.isoformat()}

    def retry(self, failure: dict[str, Any]) -> None:
        failure["attempt"] += 1
        n, invoice = failure["attempt"], failure["invoice_id"]
        body = json.dumps(
            {
                "invoice_id": invoice,
                "attempt": n,
                "idempotency_key": f"retry:{invoice}:{n}",
                "charge_idempotency_key": f"charge:{invoice}:{n}",
                "amount": failure["amount"],
                "currency": failure["currency"],
                "customer_id": failure["customer_id"],
                "scheduled_at": self.now.isoformat(),
            }
        )
        headers = signature_headers(secret=SECRET, message_id=f"job_{n}", timestamp=NOW, body=body)
        headers["Idempotency-Key"] = f"retry:{invoice}:{n}"
        outcome = self.billing.post(failure["charge_url"], content=body, headers=headers).json()
        if outcome["outcome"] in ("succeeded", "already_handled"):
            failure["state"] = "recovered"
        elif n >= 3:
            failure["state"] = "exhausted"


def test_simulate_reports_failures_advances_the_clock_and_counts_recoveries(
    tmp_path: Path,
) -> None:
    gateway = SimulatedGateway(VirtualClock(NOW), seed=9)
    app = create_app(
        db_path=tmp_path / "billing.db", secret=SECRET, provider=gateway, clock=VirtualClock(NOW)
    )
    billing = in_process(app)
    recoup = StandInRecoup(billing)
    lines: list[str] = []
    options = Options(
        billing_url=BILLING,
        recoup_url="http://recoup.test",
        token="rk_test",
        invoices=8,
        days=5,
        run_id="t1",
    )
    report = run(
        options,
        billing=billing,
        recoup=httpx.Client(transport=InProcess(recoup.app), base_url="http://recoup.test"),
        gateway_for=lambda url: GatewayClient(url, http=billing),
        say=lines.append,
    )
    # 8 invoices: two of each kind. The payday cards' first charge (Dec 2) fell inside the
    # window of the 1st, so they were paid at once; the other six failed.
    reported = recoup.failures
    assert report.failed_first == len(reported) == 6
    first = reported["inv_t1_000"]
    assert first["charge_url"] == f"{BILLING}{CHARGE_PATH}"
    assert first["card"] == {"fingerprint": "card_t1_000", "network": "visa"}
    assert first["decline_code"] == "insufficient_funds"
    assert {"failed_at", "timezone", "country", "gateway", "merchant_id"} <= set(first)
    # The stand-in retries on days 1–3: the soft decline clearing after 2 days and both
    # expired cards (updated on day 2) are recovered; the one clearing after 6 days and both
    # stolen cards are exhausted.
    assert (report.recovered, report.exhausted, report.still_open) == (3, 3, 3)
    assert report.double_charges == 0
    assert lines[-1] == "double charges at the gateway: 0"
