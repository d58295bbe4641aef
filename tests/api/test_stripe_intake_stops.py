"""The Stripe events that stop dunning or need the customer, over real HTTP on both backends,
and the facts the intake reads at Stripe with the tenant's key (a recording server answering
as Stripe): invoice.voided and invoice.marked_uncollectible, customer.subscription.deleted and
an update that sets a subscription to cancel, invoice.payment_action_required, and a plain
invoice.payment_failed completed from Stripe's charge and customer."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.fernet import Fernet

from recoup.recovery.hosted_store import HostedCharging
from recoup.sealed import SecretBox
from tests.api.conftest import Api
from tests.api.test_stripe_intake import INVOICE, Intake, make_intake
from tests.recovery.stripe_payloads import (
    BASIL,
    CREATED,
    charge,
    event,
    invoice,
    payment_intent,
    subscription,
)
from tests.support_stripe import TEST_KEY, RecordingStripe, stripe_invoice

FAILED = "invoice.payment_failed"
ACTION = "invoice.payment_action_required"
CUSTOMER = "cus_QxYz123"


@pytest.fixture
def stripe_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingStripe]:
    """A recording Stripe, where the API's Stripe clients go (`RECOUP_STRIPE_API_BASE`, read
    when the app is made: this fixture comes before `api`)."""
    with RecordingStripe() as server:
        monkeypatch.setenv("RECOUP_STRIPE_API_BASE", server.url)
        yield server


@pytest.fixture
def intake(api: Api) -> Intake:
    return make_intake(api)


@pytest.fixture
def keyed(stripe_server: RecordingStripe, intake: Intake) -> Intake:
    """The intake's tenant with a Stripe key (hosted charging), sealed as the API stores it."""
    box = SecretBox([os.environ["RECOUP_SECRET_KEY"]])
    intake.store.hosted.put_hosted_charging(
        HostedCharging(
            tenant=intake.tenant,
            provider="stripe",
            api_key=box.seal(TEST_KEY),
            updated_at=datetime.now(UTC),
        )
    )
    return intake


def opened(intake: Intake, invoice_id: str = INVOICE, **fields: Any) -> dict[str, Any]:
    """A failure of `invoice_id` (its payment expanded) opens dunning."""
    body = event(
        FAILED,
        invoice(invoice_id, intent=payment_intent(), **fields),
        event_id=f"evt_open_{invoice_id}",
    )
    answer = intake.send(body).json()
    assert answer["outcome"] == "dunning_opened", answer
    return answer


def delivered_twice(intake: Intake, body: dict[str, Any]) -> dict[str, Any]:
    """Deliver the event, then again (Stripe's retry): the second answer replays the first and
    changes nothing."""
    first = intake.send(body).json()
    states = {i["invoice_id"]: intake.invoice(i["invoice_id"]) for i in first["invoices"]}
    jobs = {i: intake.jobs(i) for i in states}
    again = intake.send(body).json()
    assert again == {**first, "replayed": True}
    assert {i: intake.invoice(i) for i in states} == states
    assert {i: intake.jobs(i) for i in states} == jobs
    return first


# Invoices closed at Stripe


@pytest.mark.parametrize(
    ("kind", "status", "reason"),
    [
        ("invoice.voided", "void", "invoice_voided"),
        ("invoice.marked_uncollectible", "uncollectible", "invoice_marked_uncollectible"),
    ],
)
def test_a_closed_invoice_stops_dunning_and_no_attempt_is_left_to_run(
    intake: Intake,
    kind: str,
    status: str,
    reason: str,
) -> None:
    opened(intake)
    assert {j["state"] for j in intake.jobs()} == {"scheduled"}
    closed = event(kind, invoice(status=status), event_id="evt_closed", created=CREATED + 60)

    answer = delivered_twice(intake, closed)

    assert answer["outcome"] == "dunning_cancelled"
    assert answer["invoices"] == [{"invoice_id": INVOICE, "state": "cancelled"}]
    timeline = intake.invoice()
    assert timeline["state"] == "cancelled"
    assert {a["state"] for a in timeline["attempts"]} == {"cancelled"}
    assert {j["state"] for j in intake.jobs()} == {"cancelled"}  # no attempt job runs after
    stopped = [e for e in timeline["events"] if e["type"] == "invoice.dunning_cancelled"]
    assert len(stopped) == 1 and stopped[0]["data"]["reason"] == reason
    # A failure of the invoice arriving after (created before the closing) opens nothing.
    late = event(FAILED, invoice(intent=payment_intent()), event_id="evt_late", created=CREATED)
    stale = intake.send(late).json()
    assert stale["outcome"] == "ignored" and "closed" in stale["detail"]
    assert intake.invoice() == timeline


def test_a_closed_invoice_not_in_dunning_is_recorded_and_its_late_failure_is_stale(
    intake: Intake,
) -> None:
    voided = event("invoice.voided", invoice(status="void"), event_id="evt_void", created=CREATED)
    answer = delivered_twice(intake, voided)
    assert answer["outcome"] == "not_in_dunning" and answer["invoices"] == []
    late = event(FAILED, invoice(intent=payment_intent()), created=CREATED - 5)
    stale = intake.send(late).json()
    assert stale["outcome"] == "ignored" and "closed" in stale["detail"]
    assert intake.http.get(f"/v1/dunning/invoices/{INVOICE}").status_code == 404


def test_an_invoice_written_off_after_its_dunning_ended_is_left_as_it_was(
    intake: Intake,
) -> None:
    intake.send(event(FAILED, invoice(intent=payment_intent(decline_code="stolen_card"))))
    before = intake.invoice()
    assert before["state"] == "exhausted"  # Recoup's final action then writes it off
    written_off = event(
        "invoice.marked_uncollectible", invoice(status="uncollectible"), event_id="evt_wo"
    )
    answer = delivered_twice(intake, written_off)
    assert answer["outcome"] == "already_final" and "exhausted" in answer["detail"]
    assert answer["invoices"] == [{"invoice_id": INVOICE, "state": "exhausted"}]
    assert intake.invoice() == before


# Subscriptions ended


def test_with_a_key_a_deleted_subscription_stops_exactly_its_invoices(
    keyed: Intake, stripe_server: RecordingStripe
) -> None:
    opened(keyed, "in_sub1")
    opened(keyed, "in_sub2")
    opened(keyed, "in_other_customer", customer="cus_Other")
    stripe_server.on(
        "GET", "/v1/invoices/in_sub1", (200, stripe_invoice("in_sub1", subscription="sub_1"))
    )
    basil = {"type": "subscription_details", "subscription_details": {"subscription": "sub_2"}}
    stripe_server.on("GET", "/v1/invoices/in_sub2", (200, stripe_invoice("in_sub2", parent=basil)))
    deleted = event(
        "customer.subscription.deleted",
        subscription("sub_1", status="canceled"),
        event_id="evt_sub_deleted",
        created=CREATED + 60,
    )

    answer = delivered_twice(keyed, deleted)

    assert answer["outcome"] == "dunning_cancelled"
    assert answer["invoices"] == [{"invoice_id": "in_sub1", "state": "cancelled"}]
    assert "1 of the customer's other ones kept" in answer["detail"]
    assert {j["state"] for j in keyed.jobs("in_sub1")} == {"cancelled"}
    # The other subscription's invoice keeps retrying, and another customer's is untouched.
    assert keyed.invoice("in_sub2")["state"] == "retrying"
    assert {j["state"] for j in keyed.jobs("in_sub2")} == {"scheduled"}
    assert keyed.invoice("in_other_customer")["state"] == "retrying"
    # One invoice read per open invoice of the customer, on the first delivery only.
    reads = sorted(r.path for r in stripe_server.sent("GET"))
    assert reads == ["/v1/invoices/in_sub1", "/v1/invoices/in_sub2"]
    # After the cancellation nothing of it is charged: a failure of one of its invoices
    # arriving later (crossed, or a new invoice) opens no dunning.
    for body, event_id in ((invoice("in_sub1_next"), "evt_n"), (invoice("in_sub1"), "evt_o")):
        body.update(subscription="sub_1", payment_intent=payment_intent())
        late = keyed.send(event(FAILED, body, event_id=event_id)).json()
        assert late["outcome"] == "ignored" and "sub_1 is cancelled" in late["detail"]
    assert keyed.http.get("/v1/dunning/invoices/in_sub1_next").status_code == 404
    # Nor does a new card bring it back: only the other subscription's invoice is re-planned.
    card = event(
        "payment_method.automatically_updated",
        {"id": "pm_1", "object": "payment_method", "customer": CUSTOMER, "card": {}},
        event_id="evt_card",
    )
    updated = keyed.send(card).json()
    assert updated["invoices"] == [{"invoice_id": "in_sub2", "state": "retrying"}]
    assert keyed.invoice("in_sub1")["state"] == "cancelled"
    assert {j["state"] for j in keyed.jobs("in_sub1")} == {"cancelled"}


def test_a_stripe_read_that_fails_stops_nothing_and_stripes_redelivery_acts(
    keyed: Intake, stripe_server: RecordingStripe
) -> None:
    opened(keyed, "in_sub1")
    opened(keyed, "in_sub2")
    stripe_server.on(
        "GET", "/v1/invoices/in_sub1", (200, stripe_invoice("in_sub1", subscription="sub_1"))
    )
    stripe_server.on("GET", "/v1/invoices/in_sub2", (500, {"error": {"type": "api_error"}}))
    deleted = event("customer.subscription.deleted", subscription("sub_1"), event_id="evt_d")

    refused = keyed.send(deleted)

    assert refused.status_code == 502, refused.text
    assert keyed.invoice("in_sub1")["state"] == "retrying"  # no partial answer
    assert keyed.invoice("in_sub2")["state"] == "retrying"
    stripe_server.on(
        "GET", "/v1/invoices/in_sub2", (200, stripe_invoice("in_sub2", subscription="sub_2"))
    )
    retried = keyed.send(deleted).json()
    assert retried["outcome"] == "dunning_cancelled" and retried["replayed"] is False
    assert retried["invoices"] == [{"invoice_id": "in_sub1", "state": "cancelled"}]


def test_without_a_key_a_deleted_subscription_stops_every_open_invoice_of_its_customer(
    intake: Intake,
) -> None:
    opened(intake, "in_sub1")
    opened(intake, "in_sub2")
    opened(intake, "in_other_customer", customer="cus_Other")
    deleted = event("customer.subscription.deleted", subscription("sub_1"), event_id="evt_d")

    answer = delivered_twice(intake, deleted)

    assert answer["outcome"] == "dunning_cancelled"
    assert sorted(i["invoice_id"] for i in answer["invoices"]) == ["in_sub1", "in_sub2"]
    assert "no Stripe key" in answer["detail"]
    assert intake.invoice("in_other_customer")["state"] == "retrying"
    for invoice_id in ("in_sub1", "in_sub2"):
        assert {j["state"] for j in intake.jobs(invoice_id)} == {"cancelled"}


@pytest.mark.parametrize("basil", [False, True])
def test_a_subscription_set_to_cancel_stops_its_dunning_and_an_other_update_does_not(
    intake: Intake,
    basil: bool,
) -> None:
    opened(intake)
    plan_change = event(
        "customer.subscription.updated",
        subscription(basil=basil),
        event_id="evt_plan",
        previous={"items": {}},
    )
    ignored = delivered_twice(intake, plan_change)
    assert ignored["outcome"] == "ignored" and "does not set" in ignored["detail"]
    assert intake.invoice()["state"] == "retrying"
    to_cancel = event(
        "customer.subscription.updated",
        subscription(cancel_at_period_end=True, basil=basil),
        event_id="evt_cancel",
        previous={"cancel_at_period_end": False},
    )

    answer = delivered_twice(intake, to_cancel)

    assert answer["outcome"] == "dunning_cancelled"
    assert answer["invoices"] == [{"invoice_id": INVOICE, "state": "cancelled"}]
    assert "set to cancel at the end of its period" in answer["detail"]
    assert {j["state"] for j in intake.jobs()} == {"cancelled"}
    timeline = intake.invoice()
    stop = [e for e in timeline["events"] if e["type"] == "invoice.dunning_cancelled"]
    assert stop[0]["data"]["reason"] == "subscription_set_to_cancel"


def test_a_subscription_ended_with_no_invoice_in_dunning_is_not_in_dunning(
    intake: Intake,
) -> None:
    deleted = event("customer.subscription.deleted", subscription(), event_id="evt_d")
    answer = delivered_twice(intake, deleted)
    assert answer["outcome"] == "not_in_dunning" and answer["invoices"] == []


# The customer must authenticate


def test_action_required_of_recoups_attempt_fails_it_for_the_customer(
    intake: Intake,
) -> None:
    opened(intake)
    body = event(
        ACTION,
        invoice(),
        event_id="evt_3ds",
        idempotency_key=f"charge:{INVOICE}:1",
        created=CREATED + 86_400,
    )

    answer = delivered_twice(intake, body)

    assert answer["outcome"] == "attempt_failed"
    timeline = intake.invoice()
    assert timeline["attempts"][0]["state"] == "failed"
    assert timeline["attempts"][0]["decline_code"] == "authentication_required"
    assert timeline["state"] == "awaiting_customer"
    assert {a["state"] for a in timeline["attempts"][1:]} == {"cancelled"}
    assert {j["state"] for j in intake.jobs()[1:]} == {"cancelled"}


@pytest.mark.parametrize("basil", [False, True])
def test_action_required_of_a_fresh_failure_opens_dunning_awaiting_the_customer(
    intake: Intake,
    basil: bool,
) -> None:
    body = event(ACTION, invoice(basil=basil), api_version=BASIL if basil else "2024-06-20")

    answer = delivered_twice(intake, body)

    assert answer["outcome"] == "dunning_opened"
    assert "must authenticate" in answer["detail"]
    timeline = intake.invoice()
    assert timeline["decline_code"] == "authentication_required"
    assert (timeline["state"], timeline["decision"]) == ("awaiting_customer", "await_customer")
    assert intake.jobs() == []


# Facts read at Stripe with the tenant's key


def script_facts(
    server: RecordingStripe,
    *,
    country: str | None,
    customer_metadata: dict[str, str] | None = None,
    invoice_id: str = INVOICE,
) -> None:
    """Stripe's invoice (pre-basil: its charge an id), the failed charge, the customer and the
    subscription, as `failure_facts` reads them."""
    server.on(
        "GET",
        f"/v1/invoices/{invoice_id}",
        (
            200,
            stripe_invoice(
                invoice_id,
                customer=CUSTOMER,
                charge="ch_3PqRsT2eZvKYlo2C1",
                payment_intent=None,
                subscription="sub_1Pq",
                customer_address=None,
            ),
        ),
    )
    server.on("GET", "/v1/charges/ch_3PqRsT2eZvKYlo2C1", (200, charge(reason="do_not_honor")))
    server.on(
        "GET",
        f"/v1/customers/{CUSTOMER}",
        (
            200,
            {
                "id": CUSTOMER,
                "object": "customer",
                "address": None if country is None else {"country": country},
                "metadata": customer_metadata or {},
            },
        ),
    )
    server.on(
        "GET",
        "/v1/subscriptions/sub_1Pq",
        (200, {"id": "sub_1Pq", "object": "subscription", "status": "past_due", "metadata": {}}),
    )


def plain_failure() -> dict[str, Any]:
    """invoice.payment_failed as Stripe sends it: the payment an id, no zone, no address."""
    return event(FAILED, invoice(timezone=None, country=None), event_id="evt_plain")


def test_a_plain_failure_gets_its_decline_code_from_stripes_charge_and_zone_from_the_address(
    keyed: Intake, stripe_server: RecordingStripe
) -> None:
    script_facts(stripe_server, country="FR")

    answer = delivered_twice(keyed, plain_failure())

    assert answer["outcome"] == "dunning_opened"
    stored = keyed.store.get_invoice(keyed.tenant, INVOICE)
    assert stored is not None
    assert (stored.decline_code, stored.card_fingerprint, stored.card_network) == (
        "do_not_honor",
        "fp_Ch4rg3",
        "visa",
    )
    assert (stored.timezone, stored.country) == ("Europe/Paris", "FR")
    detail = answer["detail"]
    assert "decline code do_not_honor read from the payment at Stripe" in detail
    assert "the only zone of their country FR (the customer's address at Stripe)" in detail
    assert "country FR from the customer's address at Stripe" in detail
    assert "no decline code" not in detail and "tenant's default" not in detail
    # The invoice, its charge, the customer and the subscription: read once.
    paths = sorted(r.path for r in stripe_server.sent("GET"))
    assert paths == [
        "/v1/charges/ch_3PqRsT2eZvKYlo2C1",
        f"/v1/customers/{CUSTOMER}",
        f"/v1/invoices/{INVOICE}",
        "/v1/subscriptions/sub_1Pq",
    ]


def test_a_country_of_several_zones_leaves_the_tenants_default_noted(
    keyed: Intake, stripe_server: RecordingStripe
) -> None:
    script_facts(stripe_server, country="US")

    answer = keyed.send(plain_failure()).json()

    stored = keyed.store.get_invoice(keyed.tenant, INVOICE)
    assert stored is not None
    assert (stored.timezone, stored.country) == ("America/New_York", "US")
    assert "their country US has 29 zones" in answer["detail"]
    assert "the tenant's default, America/New_York" in answer["detail"]


def test_the_customers_metadata_zone_comes_before_its_country(
    keyed: Intake, stripe_server: RecordingStripe
) -> None:
    script_facts(stripe_server, country="FR", customer_metadata={"timezone": "Asia/Tokyo"})

    answer = keyed.send(plain_failure()).json()

    stored = keyed.store.get_invoice(keyed.tenant, INVOICE)
    assert stored is not None and (stored.timezone, stored.country) == ("Asia/Tokyo", "FR")
    assert "customer zone: Asia/Tokyo, the customer's metadata at Stripe" in answer["detail"]


def test_a_facts_read_that_fails_still_opens_dunning_from_the_event(
    keyed: Intake, stripe_server: RecordingStripe
) -> None:
    stripe_server.on("GET", f"/v1/invoices/{INVOICE}", (500, {"error": {"type": "api_error"}}))

    answer = delivered_twice(keyed, plain_failure())

    assert answer["outcome"] == "dunning_opened"
    assert "Stripe's facts could not be read" in answer["detail"]
    stored = keyed.store.get_invoice(keyed.tenant, INVOICE)
    assert stored is not None
    assert (stored.decline_code, stored.timezone, stored.country) == (
        None,
        "America/New_York",
        None,
    )
    assert {j["state"] for j in keyed.jobs()} == {"scheduled"}


def test_a_key_sealed_with_another_secret_key_is_a_facts_read_that_failed(
    stripe_server: RecordingStripe, intake: Intake
) -> None:
    other = SecretBox([Fernet.generate_key().decode()])
    intake.store.hosted.put_hosted_charging(
        HostedCharging(
            tenant=intake.tenant,
            provider="stripe",
            api_key=other.seal(TEST_KEY),
            updated_at=datetime.now(UTC),
        )
    )

    answer = intake.send(plain_failure()).json()

    assert answer["outcome"] == "dunning_opened"
    assert "Stripe's facts could not be read" in answer["detail"]
    assert stripe_server.requests == []


def test_an_invoice_stripe_shows_paid_or_void_by_now_opens_no_dunning(
    keyed: Intake, stripe_server: RecordingStripe
) -> None:
    stripe_server.on("GET", f"/v1/invoices/{INVOICE}", (200, stripe_invoice(INVOICE, "void")))

    answer = keyed.send(plain_failure()).json()

    assert answer["outcome"] == "ignored" and "void at Stripe" in answer["detail"]
    assert keyed.http.get(f"/v1/dunning/invoices/{INVOICE}").status_code == 404


def test_a_failure_the_event_tells_whole_reads_nothing_at_stripe(
    keyed: Intake, stripe_server: RecordingStripe
) -> None:
    opened(keyed)  # codes, card and the invoice's own zone: nothing to complete
    assert stripe_server.requests == []


def test_without_a_key_nothing_is_read_at_stripe(
    stripe_server: RecordingStripe,
    intake: Intake,
) -> None:
    answer = intake.send(plain_failure()).json()
    assert answer["outcome"] == "dunning_opened" and "no decline code" in answer["detail"]
    assert stripe_server.requests == []
