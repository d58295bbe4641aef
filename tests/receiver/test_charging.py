"""`charge_invoice` on SQLite and PostgreSQL against the simulated gateway: lock, re-check,
charge under the provider's key, record; ambiguous charges reconciled with `find_charge`."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from recoup.errors import InvalidInput
from recoup.payments import Fault, FaultKind, Scenario, SimulatedGateway
from recoup.payments.provider import (
    Charge,
    ChargeRequest,
    ChargeStatus,
    ProviderTimeout,
    ProviderUnavailable,
)
from recoup.receiver import (
    ChargeAttempt,
    ChargeOutcome,
    ChargeResult,
    UnknownInvoice,
    charge_invoice,
    ledger_entries,
)
from recoup.timekeeping.clock import VirtualClock

from .conftest import NOW, Db, body_of, later


def attempt(n: int = 2, invoice_id: str = "inv_1", **changes: Any) -> ChargeAttempt:
    body = body_of(invoice_id, n, scheduled_at=changes.pop("scheduled_at", NOW)) | changes
    return ChargeAttempt.from_json(json.dumps(body).encode())


def charge(
    db: Db, gateway: SimulatedGateway, request: ChargeAttempt, seconds: float = 0
) -> ChargeResult:
    return charge_invoice(db.database, gateway, db.invoices, request, now=later(seconds))


def test_an_open_invoice_is_charged_once_and_marked_paid(db: Db, gateway: SimulatedGateway) -> None:
    db.add_invoice()
    result = charge(db, gateway, attempt(2))
    assert result.outcome is ChargeOutcome.SUCCEEDED
    assert result.to_json() == {"outcome": "succeeded", "decline_code": None, "advice_code": None}
    assert db.status() == "paid"
    (entry,) = ledger_entries(db.database, "inv_1")
    assert (entry.charge_key, entry.attempt, entry.state) == (
        "charge:inv_1:2",
        2,
        ChargeStatus.SUCCEEDED,
    )
    assert entry.provider_charge_id == result.charge_id
    assert entry.created_at == NOW
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}


def test_a_decline_is_recorded_with_its_codes_and_the_invoice_stays_open(
    db: Db, gateway: SimulatedGateway
) -> None:
    gateway.add_card("card_dnh", Scenario.hard("do_not_honor", advice_code="do_not_try_again"))
    db.add_invoice(card="card_dnh")
    result = charge(db, gateway, attempt(2))
    assert result.to_json() == {
        "outcome": "failed",
        "decline_code": "do_not_honor",
        "advice_code": "do_not_try_again",
    }
    assert db.status() == "open"
    (entry,) = ledger_entries(db.database, "inv_1")
    assert entry.state is ChargeStatus.FAILED_TERMINAL
    assert (entry.decline_code, entry.advice_code) == ("do_not_honor", "do_not_try_again")


def test_a_soft_decline_is_failed_retryable(db: Db, gateway: SimulatedGateway) -> None:
    gateway.add_card("card_nsf", Scenario.soft("insufficient_funds"))
    db.add_invoice(card="card_nsf")
    assert charge(db, gateway, attempt(1)).outcome is ChargeOutcome.FAILED
    assert ledger_entries(db.database, "inv_1")[0].state is ChargeStatus.FAILED_RETRYABLE


def test_the_provider_is_told_the_attempts_scheduled_instant(
    db: Db, gateway: SimulatedGateway
) -> None:
    # Funds arrive three days after the first try: the gateway decides by `scheduled_at`,
    # not by when the request happens to be handled.
    gateway.add_card("card_nsf", Scenario.soft(clears_after=timedelta(days=3)))
    db.add_invoice(card="card_nsf")
    assert charge(db, gateway, attempt(1, scheduled_at=NOW)).outcome is ChargeOutcome.FAILED
    early = attempt(2, scheduled_at=NOW + timedelta(days=2))
    assert charge(db, gateway, early).outcome is ChargeOutcome.FAILED
    late = attempt(3, scheduled_at=NOW + timedelta(days=3))
    assert charge(db, gateway, late).outcome is ChargeOutcome.SUCCEEDED


def test_a_repeat_of_a_settled_attempt_answers_the_same_without_calling_the_provider(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    first = charge(db, gateway, attempt(2))
    calls = gateway.stats().calls
    assert charge(db, gateway, attempt(2), seconds=5) == first
    assert gateway.stats().calls == calls


def test_an_invoice_paid_meanwhile_is_already_handled_and_not_charged(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    db.pay_by_hand()
    assert charge(db, gateway, attempt(2)).outcome is ChargeOutcome.ALREADY_HANDLED
    assert gateway.stats().calls == 0
    assert ledger_entries(db.database, "inv_1") == []


def test_a_voided_invoice_is_closed_not_already_handled_and_not_charged(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    db.execute("UPDATE invoices SET status = 'void' WHERE id = ?", "inv_1")
    assert charge(db, gateway, attempt(2)).outcome is ChargeOutcome.CLOSED
    assert gateway.stats().calls == 0
    assert ledger_entries(db.database, "inv_1") == []


def test_a_charge_in_doubt_that_never_reached_the_provider_is_closed_once_the_invoice_is_voided(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE, times=1))
    assert charge(db, gateway, attempt(2)).outcome is ChargeOutcome.PENDING
    db.execute("UPDATE invoices SET status = 'void' WHERE id = ?", "inv_1")
    assert charge(db, gateway, attempt(2), seconds=5).outcome is ChargeOutcome.CLOSED
    assert gateway.successful_charges() == []


def test_an_invoice_paid_by_another_attempt_is_already_handled(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    charge(db, gateway, attempt(2))
    assert charge(db, gateway, attempt(3)).outcome is ChargeOutcome.ALREADY_HANDLED
    assert gateway.successful_charges()[0].idempotency_key == "charge:inv_1:2"
    assert len(gateway.successful_charges()) == 1


def test_a_timeout_after_the_provider_charged_is_reconciled_without_a_second_charge(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    assert charge(db, gateway, attempt(2)).outcome is ChargeOutcome.PENDING
    assert db.status() == "open"  # unknown yet: the money moved, but we cannot say so
    assert ledger_entries(db.database, "inv_1")[0].state is ChargeStatus.PENDING

    result = charge(db, gateway, attempt(2), seconds=60)
    assert result.outcome is ChargeOutcome.SUCCEEDED
    assert db.status() == "paid"
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}
    assert gateway.stats().deliveries == 1  # found by lookup, not charged again
    (entry,) = ledger_entries(db.database, "inv_1")
    assert entry.state is ChargeStatus.SUCCEEDED
    assert entry.updated_at == later(60)


def test_a_timeout_before_the_provider_charged_is_charged_once_on_the_retry(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE, times=1))
    assert charge(db, gateway, attempt(2)).outcome is ChargeOutcome.PENDING
    assert gateway.charges_per_key() == {}
    assert charge(db, gateway, attempt(2), seconds=60).outcome is ChargeOutcome.SUCCEEDED
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}
    assert db.status() == "paid"


def in_doubt_then_paid_another_way(
    db: Db, gateway: SimulatedGateway, timeout: FaultKind
) -> ChargeResult:
    """Attempt 2 times out (`timeout`: before or after the money moved), the invoice is paid
    by hand, and attempt 2 is asked again: its answer."""
    db.add_invoice()
    gateway.inject(Fault(kind=timeout, times=1))
    assert charge(db, gateway, attempt(2)).outcome is ChargeOutcome.PENDING
    db.pay_by_hand()
    return charge(db, gateway, attempt(2), seconds=60)


def test_a_charge_in_doubt_when_the_invoice_was_paid_another_way_is_booked_and_reported(
    db: Db, gateway: SimulatedGateway
) -> None:
    # The charge timed out after the money moved; the customer then paid by bank transfer.
    # Asked again, the attempt books the charge and answers succeeded (a second payment the
    # merchant must refund) instead of hiding it behind already_handled.
    result = in_doubt_then_paid_another_way(db, gateway, FaultKind.TIMEOUT_AFTER)
    assert result.outcome is ChargeOutcome.SUCCEEDED
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}
    (entry,) = ledger_entries(db.database, "inv_1")
    assert (entry.state, entry.provider_charge_id) == (ChargeStatus.SUCCEEDED, result.charge_id)
    assert db.execute("SELECT paid_by FROM invoices WHERE id = ?", "inv_1") == [(None,)]
    assert charge(db, gateway, attempt(3), seconds=90).outcome is ChargeOutcome.ALREADY_HANDLED
    assert gateway.stats().deliveries == 1


def test_a_charge_in_doubt_that_never_reached_the_provider_is_not_made_once_paid_another_way(
    db: Db, gateway: SimulatedGateway
) -> None:
    result = in_doubt_then_paid_another_way(db, gateway, FaultKind.TIMEOUT_BEFORE)
    assert result.outcome is ChargeOutcome.ALREADY_HANDLED
    assert gateway.charges_per_key() == {}


def test_a_lookup_that_times_out_leaves_the_attempt_pending(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE, times=1))
    charge(db, gateway, attempt(2))

    class LookupTimesOut:
        def charge(self, request: ChargeRequest) -> Charge:
            raise AssertionError("no charge while the lookup is unanswered")

        def find_charge(self, idempotency_key: str) -> Charge | None:
            raise ProviderTimeout("lookup timed out")

    result = charge_invoice(db.database, LookupTimesOut(), db.invoices, attempt(2), now=NOW)
    assert result.outcome is ChargeOutcome.PENDING


def test_an_unavailable_provider_propagates_and_records_nothing(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    gateway.inject(Fault(kind=FaultKind.UNAVAILABLE, times=1))
    with pytest.raises(ProviderUnavailable):
        charge(db, gateway, attempt(2))
    assert ledger_entries(db.database, "inv_1") == []
    assert charge(db, gateway, attempt(2), seconds=60).outcome is ChargeOutcome.SUCCEEDED


def test_an_earlier_attempt_left_pending_that_succeeded_makes_a_later_one_already_handled(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    charge(db, gateway, attempt(2))  # pending; the money did move
    assert charge(db, gateway, attempt(3), seconds=60).outcome is ChargeOutcome.ALREADY_HANDLED
    assert db.status() == "paid"
    assert [e.state for e in ledger_entries(db.database, "inv_1")] == [ChargeStatus.SUCCEEDED]
    assert gateway.double_charged_invoices() == []


def test_an_earlier_attempt_left_pending_that_never_reached_the_provider_lets_a_later_one_charge(
    db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE, times=1))
    charge(db, gateway, attempt(2))
    assert charge(db, gateway, attempt(3), seconds=60).outcome is ChargeOutcome.SUCCEEDED
    # Asked again, attempt 2 finds the invoice paid.
    assert charge(db, gateway, attempt(2), seconds=120).outcome is ChargeOutcome.ALREADY_HANDLED
    assert gateway.double_charged_invoices() == []


def test_an_unknown_invoice_is_refused(db: Db, gateway: SimulatedGateway) -> None:
    with pytest.raises(UnknownInvoice, match="invoice_id: no invoice 'inv_404'"):
        charge(db, gateway, attempt(2, invoice_id="inv_404"))


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"amount": 2999}, "amount"), ({"customer_id": "cus_2"}, "customer_id")],
)
def test_a_request_that_disagrees_with_the_invoice_is_refused_naming_the_field(
    db: Db, gateway: SimulatedGateway, changes: dict[str, object], field: str
) -> None:
    db.add_invoice()
    with pytest.raises(InvalidInput) as caught:
        charge(db, gateway, attempt(2, **changes))
    assert caught.value.field == field
    assert gateway.stats().calls == 0


def test_a_charge_key_of_another_invoice_is_refused(db: Db, gateway: SimulatedGateway) -> None:
    db.add_invoice("inv_1")
    db.add_invoice("inv_2")
    charge(db, gateway, attempt(2, "inv_1"))
    body = body_of("inv_2", 2) | {"charge_idempotency_key": "charge:inv_1:2"}
    stolen = ChargeAttempt.from_json(json.dumps(body).encode())
    with pytest.raises(
        InvalidInput, match=r"charge_idempotency_key: .* already used for invoice 'inv_1'"
    ):
        charge(db, gateway, stolen)


def _concurrently(*calls: Callable[[], ChargeResult]) -> list[ChargeResult]:
    results: list[ChargeResult] = []
    errors: list[BaseException] = []

    def run(call: Callable[[], ChargeResult]) -> None:
        try:
            results.append(call())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    assert len(results) == len(calls)
    return results


def _held_gateway(entered: threading.Event) -> tuple[SimulatedGateway, threading.Event]:
    """A gateway whose first charge holds its answer until `release` is set (or 2 s pass):
    the charging thread keeps the invoice's lock meanwhile, so the other thread races it."""
    release = threading.Event()

    def hold(seconds: float) -> None:
        entered.set()
        release.wait(timeout=2)

    held = SimulatedGateway(VirtualClock(NOW), seed=1, sleep=hold)
    held.inject(Fault(kind=FaultKind.SLOW, delay_seconds=1.0, times=1))
    return held, release


def test_the_same_attempt_charged_twice_concurrently_charges_once(db: Db) -> None:
    db.add_invoice()
    entered = threading.Event()
    held, release = _held_gateway(entered)

    def first() -> ChargeResult:
        return charge(db, held, attempt(2))

    def second() -> ChargeResult:
        entered.wait(timeout=5)  # start while the first holds the lock inside the provider
        threading.Timer(0.05, release.set).start()
        return charge(db, held, attempt(2))

    results = _concurrently(first, second)
    assert {r.outcome for r in results} == {ChargeOutcome.SUCCEEDED}
    assert held.charges_per_key() == {"charge:inv_1:2": 1}
    assert held.stats().deliveries == 1  # the second replayed the ledger, not the provider
    assert db.status() == "paid"


def test_two_attempts_of_one_invoice_concurrently_charge_it_once(db: Db) -> None:
    db.add_invoice()
    entered = threading.Event()
    held, release = _held_gateway(entered)

    def second() -> ChargeResult:
        entered.wait(timeout=5)
        threading.Timer(0.05, release.set).start()
        return charge(db, held, attempt(3))

    results = _concurrently(lambda: charge(db, held, attempt(2)), second)
    outcomes = sorted(r.outcome.value for r in results)
    assert outcomes == ["already_handled", "succeeded"]
    assert len(held.successful_charges()) == 1
    assert held.double_charged_invoices() == []
