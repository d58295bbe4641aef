"""The charge endpoint (`charge_view`, the provider and invoice book from the settings) and
`charge_invoice` on SQLite and PostgreSQL: charged at most once per attempt whatever arrives
twice, dies half-way or runs at the same time, with ambiguous charges reconciled through
`find_charge` before anything is charged again."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
from django.db import connections, transaction
from django.test import Client

from recoup.contrib.django import charge_invoice, ledger_entries
from recoup.contrib.django.charging import lock_invoice
from recoup.contrib.django.models import ChargeRecord, IdempotencyRecord
from recoup.payments import Fault, FaultKind, Scenario, SimulatedGateway
from recoup.payments.provider import Charge, ChargeRequest, ChargeStatus
from recoup.receiver import ChargeAttempt, ChargeOutcome
from tests.contrib_django.billing import payments
from tests.contrib_django.billing.models import Invoice
from tests.support import wait_until

from .conftest import NOW, add_invoice, charge_body, deliver, in_background, in_threads

CHARGE = "/recoup/charge"


def charge(client: Client, body: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    body = body if body is not None else charge_body()
    return deliver(client, CHARGE, body, message_id=f"job_{body['idempotency_key']}", **kwargs)


def attempt_of(body: dict[str, Any]) -> ChargeAttempt:
    return ChargeAttempt.from_json(json.dumps(body).encode())


def outcome(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.content
    found: dict[str, Any] = json.loads(response.content)
    return found


def test_an_attempt_is_charged_once_the_invoice_paid_and_the_ledger_written(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice()
    answer = outcome(charge(client))
    assert answer == {"outcome": "succeeded", "decline_code": None, "advice_code": None}
    invoice = Invoice.objects.get()
    assert invoice.status == "paid" and invoice.paid_charge_id
    (entry,) = ledger_entries("inv_1")
    assert (entry.charge_key, entry.attempt, entry.state) == (
        "charge:inv_1:2",
        2,
        ChargeStatus.SUCCEEDED,
    )
    assert entry.provider_charge_id == invoice.paid_charge_id
    assert entry.created_at == NOW and (entry.amount, entry.currency) == (1999, "usd")
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}


def test_a_replayed_request_gets_the_stored_answer_without_a_provider_call(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    # Recoup never saw the first answer (the connection dropped after the commit).
    add_invoice()
    first = charge(client)
    again = charge(client)
    assert again.content == first.content and again["Idempotent-Replayed"] == "true"
    assert gateway.stats().calls == 1
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}


def test_a_decline_is_answered_with_its_codes_and_replayed(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    gateway.add_card("card_dnh", Scenario.hard("do_not_honor", advice_code="do_not_try_again"))
    add_invoice(card="card_dnh")
    answer = outcome(charge(client))
    assert answer == {
        "outcome": "failed",
        "decline_code": "do_not_honor",
        "advice_code": "do_not_try_again",
    }
    assert Invoice.objects.get().status == "open"
    (entry,) = ledger_entries("inv_1")
    assert entry.state is ChargeStatus.FAILED_TERMINAL
    assert charge(client)["Idempotent-Replayed"] == "true"
    assert gateway.stats().calls == 1


def test_an_unknown_invoice_is_404_and_nothing_is_stored(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    response = charge(client)
    assert response.status_code == 404
    assert json.loads(response.content)["detail"] == "invoice_id: no invoice 'inv_1'"
    assert IdempotencyRecord.objects.count() == 0 and gateway.stats().calls == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (charge_body(amount=2000), "amount"),
        (charge_body(customer_id="cus_2"), "customer_id"),
        (charge_body(attempt=0), "attempt"),
        (charge_body(currency="dollars"), "currency"),
    ],
    ids=["amount differs", "customer differs", "attempt zero", "not a currency"],
)
def test_a_request_the_invoice_or_the_contract_refuses_is_422_naming_the_field(
    database: str, client: Client, gateway: SimulatedGateway, body: dict[str, Any], field: str
) -> None:
    add_invoice()
    response = charge(client, body)
    assert response.status_code == 422
    assert json.loads(response.content)["errors"][0]["field"] == field
    assert gateway.stats().calls == 0 and Invoice.objects.get().status == "open"


@pytest.mark.parametrize("key", ["retry:inv_1:3", ""], ids=["another key", "none"])
def test_the_idempotency_key_must_be_the_bodys(
    database: str, client: Client, gateway: SimulatedGateway, key: str
) -> None:
    add_invoice()
    response = deliver(client, CHARGE, charge_body(), key=key)
    assert response.status_code == 422
    body = json.loads(response.content)
    assert body["errors"][0]["field"] == "Idempotency-Key"
    assert ("expected the header" in body["detail"]) is (key == "")
    assert gateway.stats().calls == 0


def test_the_provider_unavailable_is_503_and_the_next_ask_charges(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice()
    gateway.inject(Fault(kind=FaultKind.UNAVAILABLE, times=1))
    down = charge(client)
    assert down.status_code == 503 and down["Retry-After"] == "60"
    assert ChargeRecord.objects.count() == 0 and IdempotencyRecord.objects.count() == 0
    assert outcome(charge(client))["outcome"] == "succeeded"
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}


def test_a_lost_provider_answer_is_pending_and_the_retry_reconciles_through_find_charge(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice()
    # The money moves, but the answer is lost on the way back.
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    first = outcome(charge(client))
    assert first["outcome"] == "pending"
    (entry,) = ledger_entries("inv_1")
    assert entry.state is ChargeStatus.PENDING and entry.provider_charge_id is None
    assert IdempotencyRecord.objects.count() == 0  # "pending" is not the final answer
    assert Invoice.objects.get().status == "open"
    retry = outcome(charge(client))
    assert retry["outcome"] == "succeeded"
    assert gateway.stats().calls == 1  # the retry asked find_charge, and charged nothing
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}
    assert Invoice.objects.get().status == "paid"
    assert [e.state for e in ledger_entries("inv_1")] == [ChargeStatus.SUCCEEDED]


def test_a_charge_never_made_is_tried_again_with_the_same_key(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice()
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE, times=1))  # the request was lost
    assert outcome(charge(client))["outcome"] == "pending"
    assert outcome(charge(client))["outcome"] == "succeeded"
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}


def test_a_handler_killed_between_the_charge_and_the_commit_never_charges_twice(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice()
    payments.Invoices.crashes = 1
    crashed = charge(client)
    assert crashed.status_code == 500
    # Everything rolled back: no ledger row, the invoice open, the key free again.
    assert ChargeRecord.objects.count() == 0 and IdempotencyRecord.objects.count() == 0
    assert Invoice.objects.get().status == "open"
    retry = outcome(charge(client))
    assert retry["outcome"] == "succeeded"
    # Charged again under the same key: the provider answered with the first charge.
    assert gateway.stats().calls == 2
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}
    assert len(gateway.successful_charges()) == 1


def test_a_pending_attempt_is_reconciled_before_the_next_attempt_charges(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice()
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    assert outcome(charge(client, charge_body(attempt=2)))["outcome"] == "pending"
    # Attempt 3 comes first: attempt 2's charge went through, so the invoice is paid.
    assert outcome(charge(client, charge_body(attempt=3)))["outcome"] == "already_handled"
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}
    assert Invoice.objects.get().status == "paid"
    assert [(e.attempt, e.state) for e in ledger_entries("inv_1")] == [(2, ChargeStatus.SUCCEEDED)]


def test_an_invoice_paid_meanwhile_is_already_handled(
    database: str, client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice(status="paid")
    assert outcome(charge(client))["outcome"] == "already_handled"
    assert gateway.stats().calls == 0


def test_charge_invoice_is_usable_without_the_view(
    database: str, gateway: SimulatedGateway
) -> None:
    add_invoice()
    attempt = attempt_of(charge_body())
    books = payments.Invoices()
    first = charge_invoice(attempt, provider=gateway, invoices=books, now=NOW)
    second = charge_invoice(attempt, provider=gateway, invoices=books, now=NOW, using=database)
    assert first.outcome is second.outcome is ChargeOutcome.SUCCEEDED
    assert first.charge_id == second.charge_id
    assert gateway.stats().calls == 1  # the second found the ledger settled


class Gate:
    """A provider whose charges wait at a gate until the test opens it (the `gate` fixture
    opens it at the end, so that a failing test leaves no thread waiting)."""

    def __init__(self, gateway: SimulatedGateway) -> None:
        self.gateway = gateway
        self.entered = threading.Event()
        self.open = threading.Event()

    def charge(self, request: ChargeRequest) -> Charge:
        self.entered.set()
        assert self.open.wait(timeout=30)
        return self.gateway.charge(request)

    def find_charge(self, idempotency_key: str) -> Charge | None:
        return self.gateway.find_charge(idempotency_key)


@pytest.fixture
def gate(gateway: SimulatedGateway) -> Iterator[Gate]:
    """The billing app's provider, behind a gate."""
    found = Gate(gateway)
    payments.provider.current = found
    yield found
    found.open.set()


@pytest.mark.real_transactions
def test_simultaneous_duplicates_of_a_charge_request_charge_once(
    database: str, gateway: SimulatedGateway
) -> None:
    add_invoice()
    answers = in_threads([lambda: charge(Client()) for _ in range(6)])
    assert {a.status_code for a in answers} <= {200, 409}
    assert {a.content for a in answers if a.status_code == 200} == {
        json.dumps({"outcome": "succeeded", "decline_code": None, "advice_code": None}).encode()
    }
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}
    assert Invoice.objects.get().status == "paid"


@pytest.mark.real_transactions
def test_a_duplicate_while_the_provider_holds_the_first_never_reaches_the_provider(
    database: str, gateway: SimulatedGateway, gate: Gate
) -> None:
    add_invoice()
    first = in_background(lambda: charge(Client()))
    assert gate.entered.wait(timeout=30)
    duplicate = in_background(lambda: charge(Client()))
    if database == "postgres":
        assert duplicate().status_code == 409  # at once: the first holds the key
    gate.open.set()
    assert outcome(first())["outcome"] == "succeeded"
    if database == "default":
        assert duplicate()["Idempotent-Replayed"] == "true"  # waited for the write lock
    assert gateway.stats().calls == 1


@pytest.mark.real_transactions
def test_attempts_of_one_invoice_at_the_same_time_charge_it_once(
    database: str, gateway: SimulatedGateway
) -> None:
    add_invoice()
    answers = in_threads([lambda n=n: charge(Client(), charge_body(attempt=n)) for n in (2, 3, 4)])
    outcomes = sorted(outcome(a)["outcome"] for a in answers)
    assert outcomes == ["already_handled", "already_handled", "succeeded"]
    assert len(gateway.successful_charges()) == 1


@pytest.mark.real_transactions
def test_the_invoice_lock_serialises_charges_even_when_the_book_forgets_for_update(
    database: str, gateway: SimulatedGateway, gate: Gate
) -> None:
    """The receiver's own lock: PostgreSQL's advisory lock on the invoice id (the second
    charge is seen waiting on it), SQLite's write lock (another writer is refused)."""
    add_invoice()
    payments.Invoices.for_update = False
    attempts = [attempt_of(charge_body(attempt=n)) for n in (2, 3)]

    def run(attempt: ChargeAttempt) -> ChargeOutcome:
        found = charge_invoice(attempt, provider=gate, invoices=payments.Invoices(), now=NOW)
        return found.outcome

    first = in_background(lambda: run(attempts[0]))
    assert gate.entered.wait(timeout=30)
    if database == "postgres":
        second = in_background(lambda: run(attempts[1]))
        assert wait_until(lambda: _waiting_on_advisory_locks(database) == 1)
    else:
        assert_sqlite_write_locked(database)
        second = in_background(lambda: run(attempts[1]))
    gate.open.set()
    assert first() is ChargeOutcome.SUCCEEDED
    assert second() is ChargeOutcome.ALREADY_HANDLED
    assert len(gateway.successful_charges()) == 1


def _waiting_on_advisory_locks(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        (count,) = cursor.fetchone()
    return int(count)


@pytest.mark.django_db(transaction=True)  # SQLite ("default") only
def test_lock_invoice_makes_a_sqlite_transaction_a_writer_before_it_reads() -> None:
    with transaction.atomic(using="default"):
        lock_invoice("default", "inv_1")
        assert_sqlite_write_locked("default")


def assert_sqlite_write_locked(alias: str) -> None:
    """Another connection cannot begin writing the SQLite database right now."""
    path = connections[alias].settings_dict["NAME"]
    with closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as other:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        if other.in_transaction:  # it began after all: the test fails, and frees the lock
            other.execute("ROLLBACK")
