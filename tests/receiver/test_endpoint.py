"""The charge endpoint mounted on FastAPI, driven with signed requests as Recoup sends them,
on SQLite and PostgreSQL: statuses, replays, reconciliation, and duplicate deliveries."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from recoup.payments import Fault, FaultKind, SimulatedGateway
from recoup.payments.provider import Charge, ChargeRequest
from recoup.receiver import ChargeEndpoint, IdempotencyStore, body_fingerprint
from recoup.receiver.fastapi import charge_router
from recoup.timekeeping.clock import VirtualClock

from .conftest import NOW, SECRET, Db, body_of, in_process, later, signed

PATH = "/recoup/charge"


def make_client(db: Db, provider: Any, clock: VirtualClock | None = None) -> httpx.Client:
    endpoint = ChargeEndpoint(
        database=db.database, provider=provider, invoices=db.invoices, secret=SECRET
    )
    app = FastAPI()
    app.include_router(charge_router(endpoint, path=PATH, clock=clock or VirtualClock(NOW)))
    return in_process(app)


@pytest.fixture
def client(db: Db, gateway: SimulatedGateway) -> Iterator[httpx.Client]:
    with make_client(db, gateway) as found:
        yield found


def post(client: httpx.Client, body: dict[str, Any] | bytes, **kwargs: Any) -> httpx.Response:
    headers, raw = signed(body, **kwargs)
    return client.post(PATH, content=raw, headers=headers)


def test_a_signed_request_charges_the_invoice(
    client: httpx.Client, db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    response = post(client, body_of())
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"outcome": "succeeded", "decline_code": None, "advice_code": None}
    assert db.status() == "paid"
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}


def test_a_repeat_replays_the_stored_answer(
    client: httpx.Client, db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    first = post(client, body_of())
    again = post(client, body_of())
    assert again.status_code == 200
    assert again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert gateway.stats().calls == 1


def test_a_bad_signature_is_401_and_charges_nothing(
    client: httpx.Client, db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    headers, raw = signed(body_of())
    response = client.post(PATH, content=raw.replace(b"1999", b"1998"), headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert "webhook-signature" in response.json()["detail"]
    assert gateway.stats().calls == 0


def test_a_stale_request_is_401(client: httpx.Client, db: Db) -> None:
    db.add_invoice()
    response = post(client, body_of(), at=later(-301))
    assert response.status_code == 401
    assert "webhook-timestamp" in response.json()["detail"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"amount": "1999"}, "amount"),
        ({"attempt": True}, "attempt"),
        ({"currency": "dollars"}, "currency"),
        ({"scheduled_at": "tomorrow"}, "scheduled_at"),
        ({"invoice_id": ""}, "invoice_id"),
    ],
)
def test_an_invalid_body_is_422_naming_the_field(
    client: httpx.Client, change: dict[str, Any], field: str
) -> None:
    response = post(client, body_of() | change)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == field


def test_a_body_that_is_not_json_is_422(client: httpx.Client) -> None:
    response = post(client, b"[1, 2")
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "body"


def test_an_idempotency_key_header_unlike_the_body_is_422(client: httpx.Client) -> None:
    headers, raw = signed(body_of())
    response = client.post(PATH, content=raw, headers={**headers, "Idempotency-Key": "retry:x:1"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "Idempotency-Key"
    del headers["Idempotency-Key"]
    assert client.post(PATH, content=raw, headers=headers).status_code == 422


def test_the_idempotency_key_may_be_a_quoted_structured_field(client: httpx.Client, db: Db) -> None:
    db.add_invoice()
    headers, raw = signed(body_of())
    response = client.post(
        PATH, content=raw, headers={**headers, "Idempotency-Key": '"retry:inv_1:2"'}
    )
    assert response.status_code == 200


def test_another_body_under_a_used_key_is_422(client: httpx.Client, db: Db) -> None:
    db.add_invoice()
    post(client, body_of())
    response = post(client, body_of(scheduled_at=later(60)))
    assert response.status_code == 422
    assert response.json()["type"].endswith("key-reused")


def test_a_request_in_flight_elsewhere_is_409_with_retry_after(
    client: httpx.Client, db: Db
) -> None:
    db.add_invoice()
    headers, raw = signed(body_of())
    # Another handler holds the key (it is inside the provider right now).
    IdempotencyStore(db.database).begin("retry:inv_1:2", body_fingerprint(raw), now=NOW)
    response = client.post(PATH, content=raw, headers=headers)
    assert response.status_code == 409
    assert int(response.headers["retry-after"]) > 0


def test_an_unknown_invoice_is_404_and_not_remembered(client: httpx.Client, db: Db) -> None:
    assert post(client, body_of()).status_code == 404
    db.add_invoice()  # the invoice arrives (a replica caught up): the retry goes through
    assert post(client, body_of()).json()["outcome"] == "succeeded"


def test_an_unavailable_provider_is_503_and_the_retry_charges(
    client: httpx.Client, db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    gateway.inject(Fault(kind=FaultKind.UNAVAILABLE, times=1))
    response = post(client, body_of())
    assert response.status_code == 503
    assert "retry-after" in response.headers
    assert post(client, body_of()).json()["outcome"] == "succeeded"
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}


def test_pending_is_not_stored_so_the_next_ask_reconciles(
    client: httpx.Client, db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    assert post(client, body_of()).json()["outcome"] == "pending"
    again = post(client, body_of())
    assert again.json()["outcome"] == "succeeded"
    assert "idempotent-replayed" not in again.headers
    assert gateway.stats().deliveries == 1


def test_an_invoice_paid_meanwhile_is_already_handled(
    client: httpx.Client, db: Db, gateway: SimulatedGateway
) -> None:
    db.add_invoice()
    db.pay_by_hand()
    response = post(client, body_of())
    assert response.json() == {
        "outcome": "already_handled",
        "decline_code": None,
        "advice_code": None,
    }
    assert gateway.stats().calls == 0


def test_a_bug_is_500_and_releases_the_key(db: Db, gateway: SimulatedGateway) -> None:
    db.add_invoice()

    class Broken:
        def charge(self, request: ChargeRequest) -> Charge:
            raise RuntimeError("a bug")

        def find_charge(self, idempotency_key: str) -> Charge | None:
            return None

    with make_client(db, Broken()) as broken:
        assert post(broken, body_of()).status_code == 500
    with make_client(db, gateway) as fixed:
        assert post(fixed, body_of()).json()["outcome"] == "succeeded"


def test_the_same_attempt_delivered_twice_concurrently_charges_once(db: Db) -> None:
    db.add_invoice()
    entered, release = threading.Event(), threading.Event()

    def hold(seconds: float) -> None:
        entered.set()
        release.wait(timeout=2)

    held = SimulatedGateway(VirtualClock(NOW), seed=1, sleep=hold)
    held.inject(Fault(kind=FaultKind.SLOW, delay_seconds=1.0, times=1))
    answers: list[httpx.Response] = []

    with make_client(db, held) as client:

        def deliver() -> None:
            answers.append(post(client, body_of()))

        def duplicate() -> None:
            entered.wait(timeout=5)  # while the first is inside the provider
            threading.Timer(0.05, release.set).start()
            deliver()

        threads = [threading.Thread(target=deliver), threading.Thread(target=duplicate)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(answers) == 2
        # The duplicate is told to come back (409), or, on SQLite where it waits for the
        # write lock, gets the first one's answer replayed. Coming back, it gets the replay.
        statuses = sorted(a.status_code for a in answers)
        assert statuses in ([200, 200], [200, 409])
        final = post(client, body_of())
    assert final.status_code == 200
    assert final.headers["idempotent-replayed"] == "true"
    assert json.loads(final.content)["outcome"] == "succeeded"
    for answer in answers:
        if answer.status_code == 200:
            assert answer.json()["outcome"] == "succeeded"
    assert held.charges_per_key() == {"charge:inv_1:2": 1}
    assert held.stats().deliveries == 1
