"""The nightly batch the demo compares against, the double-charge audit and the demo's resync
pace, on hand-built inputs with known answers."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from recoup.demo.audit import Ledger, count_double_charges, read_ledger
from recoup.demo.nightly import nightly_batch
from recoup.demo.population import Customer
from recoup.demo.run import DailyResync
from recoup.receiver import SqliteDatabase
from recoup.timekeeping.clock import VirtualClock

FAILED = datetime(2026, 10, 6, 15, 30, tzinfo=UTC)  # nights at 00:00 UTC on Oct 7, 9, 11, 13


def customer(n: int, **changes: object) -> Customer:
    base = Customer(
        invoice_id=f"inv_{n}",
        customer_id=f"cus_{n}",
        amount=1900,
        currency="usd",
        timezone="America/New_York",
        country="US",
        failed_at=FAILED,
        decline_code="insufficient_funds",
        advice_code=None,
        card=f"card_{n}",
        network="visa",
        gateway="stripe",
        merchant_id="acct_na",
        outlook="never",
        clears_after=None,
        card_updated_at=None,
        paid_out_of_band_at=None,
        fault=None,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_the_nightly_batch_retries_on_fixed_nights_whatever_the_decline() -> None:
    customers = [
        # Clears two days after the failure: the Oct 7 night fails, Oct 9 recovers.
        customer(1, outlook="clears", clears_after=timedelta(days=2)),
        customer(2, decline_code="stolen_card", outlook="hard"),  # tried four times anyway
        # Paid another way on Oct 10: tried on Oct 7 and 9 only.
        customer(3, paid_out_of_band_at=datetime(2026, 10, 10, tzinfo=UTC)),
        # A new card on Oct 8 at noon: the Oct 9 night goes through.
        customer(
            4,
            decline_code="expired_card",
            outlook="update",
            card_updated_at=datetime(2026, 10, 8, 12, tzinfo=UTC),
        ),
    ]
    figures = nightly_batch(customers, seed=1)
    assert figures.invoices == 4
    assert figures.recovered_by_retry == 2
    assert figures.paid_out_of_band == 1
    assert figures.attempts == 2 + 4 + 2 + 2
    assert figures.attempts_on_hard_declines == 4
    # Every first night holds all four invoices' attempts, in one minute.
    assert (figures.peak_per_minute, figures.peak_minute) == (4, "2026-10-07T00:00Z")
    assert figures.recovery_rate == 0.5


def test_the_audit_counts_each_way_money_moved_twice() -> None:
    stats = {
        "charges_per_key": {
            "initial:inv_1": 0,
            "charge:inv_1:1": 1,
            "charge:inv_2:1": 2,  # one key charged twice
            "charge:inv_3:1": 1,
            "charge:inv_4:2": 1,
        },
        "double_charged_invoices": ["inv_2"],
    }
    ledger = Ledger(
        succeeded={"inv_1": [1], "inv_5": [1, 2]}, paid=set(), paid_without_charge=set()
    )
    found = count_double_charges(stats, ledger, paid_out_of_band=["inv_4", "inv_6"])
    assert found.gateway_keys == ["charge:inv_2:1"]
    assert found.gateway_invoices == ["inv_2"]
    assert found.ledger_invoices == ["inv_5"]
    assert found.paid_out_of_band_and_charged == ["inv_4"]  # inv_6 was never charged
    assert found.invoices == ["inv_2", "inv_4", "inv_5"] and found.total == 3
    assert found.money_moved == 5
    clean = count_double_charges(
        {"charges_per_key": {"charge:inv_1:1": 1}, "double_charged_invoices": []},
        Ledger(succeeded={"inv_1": [1]}, paid={"inv_1"}, paid_without_charge=set()),
        paid_out_of_band=[],
    )
    assert clean.total == 0 and clean.as_json()["total"] == 0


def test_the_ledger_is_read_from_the_billing_apps_database(tmp_path: Path) -> None:
    path = tmp_path / "billing.db"
    database = SqliteDatabase(path)
    database.ensure_schema()
    with database.transaction() as conn:
        conn.execute(
            "CREATE TABLE invoices (id TEXT PRIMARY KEY, status TEXT, paid_charge_id TEXT)"
        )
        conn.executemany(
            "INSERT INTO invoices VALUES (?, ?, ?)",
            [("inv_1", "paid", "ch_1"), ("inv_2", "paid", None), ("inv_3", "open", None)],
        )
        for key, invoice, attempt, state in [
            ("charge:inv_1:1", "inv_1", 1, "failed_retryable"),
            ("charge:inv_1:2", "inv_1", 2, "succeeded"),
        ]:
            database.run(
                conn,
                "record_charge",
                {
                    "charge_key": key,
                    "invoice_id": invoice,
                    "attempt": attempt,
                    "state": state,
                    "amount": 1900,
                    "currency": "usd",
                    "provider_charge_id": f"ch_{attempt}",
                    "decline_code": None,
                    "advice_code": None,
                    "now": 0,
                },
            )
    database.close()
    ledger = read_ledger(path)
    assert ledger.succeeded == {"inv_1": [2]}
    assert ledger.paid == {"inv_1", "inv_2"} and ledger.paid_without_charge == {"inv_2"}


def test_the_demo_resyncs_once_per_virtual_day() -> None:
    clock = VirtualClock(FAILED)
    calls: list[datetime] = []
    resync = DailyResync(lambda: calls.append(clock.now()), clock)
    for hours in (0, 1, 5, 9, 20, 30, 31, 80):  # Oct 6 15:30 + these hours
        clock.set(FAILED + timedelta(hours=hours))
        resync()
    assert [c.date().day for c in calls] == [6, 7, 9]  # UTC days: none on the 8th
