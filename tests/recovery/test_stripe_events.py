"""Reading Stripe events (recoup.recovery.stripe_events): which fields of the payloads as
Stripe sends them become the failure, the payment and the card update; and that no shape of
event makes the reader fail."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.dunning.failure import ChargeFailure
from recoup.errors import InvalidInput
from recoup.recovery.records import FailureReport
from recoup.recovery.stripe_events import (
    GATEWAY,
    SUPPORTED,
    CardUpdated,
    Ignored,
    InvoiceClosed,
    InvoiceFailed,
    InvoicePaid,
    Reading,
    SubscriptionEnded,
    event_head,
    read_event,
    recoup_attempt,
)
from tests.recovery.stripe_payloads import (
    BASIL,
    CREATED,
    charge,
    customer,
    event,
    invoice,
    payment_intent,
    subscription,
)

FAILED = "invoice.payment_failed"
ACTION = "invoice.payment_action_required"


def read(body: dict[str, Any], default: str = "Europe/Paris") -> Reading:
    return read_event(event_head(body), default_timezone=default)


def failure(body: dict[str, Any], default: str = "Europe/Paris") -> InvoiceFailed:
    found = read(body, default)
    assert isinstance(found, InvoiceFailed), found
    return found


def test_a_failure_becomes_the_one_report_dunning_opens_from_every_part_it_read() -> None:
    found = failure(event(FAILED, invoice(intent=payment_intent()), account="acct_1M"))
    report = found.to_report()
    assert isinstance(report, FailureReport)
    # Every part of the failure the reading has, under the same name, and the gateway: Stripe.
    for name in ChargeFailure.__dataclass_fields__.keys() - {"gateway"}:
        assert getattr(report, name) == getattr(found, name), name
    assert report.gateway == GATEWAY == "stripe"
    contact = found.contact
    assert (report.customer_email, report.customer_name, report.locale) == (
        contact.email,
        contact.name,
        contact.locale,
    )
    assert report.customer_email == "jenny@example.com"
    assert report.merchant_id == "acct_1M" and report.decline_code == "insufficient_funds"


def test_a_failure_with_its_payment_intent_expanded_gives_codes_card_zone_and_country() -> None:
    found = failure(event(FAILED, invoice(intent=payment_intent()), account="acct_1M"))
    assert found.invoice_id == "in_1PqRsT2eZvKYlo2C" and found.customer_id == "cus_QxYz123"
    assert (found.amount, found.currency) == (1999, "usd")
    assert found.failed_at == datetime.fromtimestamp(CREATED, UTC)
    assert (found.timezone, found.country) == ("America/Chicago", "US")
    assert (found.decline_code, found.advice_code) == ("insufficient_funds", None)
    assert (found.card_fingerprint, found.card_network) == ("fp_Q1w2E3r4", "visa")
    assert found.merchant_id == "acct_1M" and found.attempt is None
    assert found.notes == ()


def test_the_basil_shape_reads_the_payment_intent_of_its_payments() -> None:
    intent = payment_intent(decline_code="stolen_card", advice_code="do_not_try_again")
    found = failure(event(FAILED, invoice(intent=intent, basil=True), api_version=BASIL))
    assert (found.decline_code, found.advice_code) == ("stolen_card", "do_not_try_again")
    assert found.card_fingerprint == "fp_Q1w2E3r4"


def test_an_expanded_charge_gives_its_outcome_reason_and_card() -> None:
    body = event(FAILED, invoice(charge_object=charge(reason="expired_card", advice_code="x")))
    found = failure(body)
    assert (found.decline_code, found.advice_code) == ("expired_card", "x")
    assert (found.card_fingerprint, found.card_network) == ("fp_Ch4rg3", "visa")


@pytest.mark.parametrize(
    ("intent", "decline", "advice"),
    [
        # No decline code: the error code when it says more than "declined" ...
        (payment_intent(decline_code=None, code="expired_card"), "expired_card", None),
        # ... else the network's decline code (ISO 8583).
        (payment_intent(decline_code=None, network_decline_code="05"), "05", None),
        (payment_intent(decline_code=None), None, None),
        # A Mastercard network advice code (MAC) when Stripe gives no advice code.
        (
            payment_intent(network_advice_code="24", brand="mastercard"),
            "insufficient_funds",
            "mac:24",
        ),
        (payment_intent(network_advice_code="24", brand="visa"), "insufficient_funds", None),
        (
            payment_intent(
                advice_code="try_again_later", network_advice_code="03", brand="mastercard"
            ),
            "insufficient_funds",
            "try_again_later",
        ),
    ],
)
def test_which_code_is_the_decline_and_which_the_advice(
    intent: dict[str, Any], decline: str | None, advice: str | None
) -> None:
    found = failure(event(FAILED, invoice(intent=intent)))
    assert (found.decline_code, found.advice_code) == (decline, advice)


def test_a_blocked_charge_is_the_radar_reason_and_an_invalid_one_its_failure_code() -> None:
    blocked = charge(reason="highest_risk_level", outcome_type="blocked")
    assert failure(event(FAILED, invoice(charge_object=blocked))).decline_code == (
        "highest_risk_level"
    )
    invalid = charge(reason="x", outcome_type="invalid", failure_code="incorrect_cvc")
    assert failure(event(FAILED, invoice(charge_object=invalid))).decline_code == "incorrect_cvc"


def test_ids_only_as_stripe_sends_a_webhook_mean_no_decline_code_noted() -> None:
    found = failure(event(FAILED, invoice()))
    assert found.decline_code is None and found.card_fingerprint is None
    assert any("no decline code" in n for n in found.notes)


def test_the_zone_comes_from_the_invoice_then_the_subscription_then_the_tenant() -> None:
    assert failure(event(FAILED, invoice(timezone="Asia/Tokyo"))).timezone == "Asia/Tokyo"
    body = invoice(timezone=None)
    body["subscription_details"] = {"metadata": {"timezone": "Europe/Berlin"}}
    assert failure(event(FAILED, body)).timezone == "Europe/Berlin"
    basil = invoice(timezone=None, basil=True)
    basil["parent"]["subscription_details"]["metadata"] = {"timezone": "Australia/Sydney"}
    assert failure(event(FAILED, basil)).timezone == "Australia/Sydney"
    found = failure(event(FAILED, invoice(timezone=None)), default="America/New_York")
    assert found.timezone == "America/New_York"
    assert any("tenant's default" in n for n in found.notes)


@pytest.mark.parametrize(
    ("country", "zone", "source"),
    [
        ("FR", "Europe/Paris", "country"),  # one zone: the customer's own
        ("jp", "Asia/Tokyo", "country"),
        ("US", "Europe/Paris", "default"),  # 29 zones: the tenant's default, noted
        ("ZZ", "Europe/Paris", "default"),
        (None, "Europe/Paris", "default"),
    ],
)
def test_without_metadata_the_zone_is_the_customer_countrys_when_it_has_only_one(
    country: str | None, zone: str, source: str
) -> None:
    found = failure(event(FAILED, invoice(timezone=None, country=country)))
    assert (found.timezone, found.timezone_source) == (zone, source)
    if country == "US":
        assert any("US has 29 zones" in n for n in found.notes), found.notes
        assert any("tenant's default" in n for n in found.notes)
    metadata = failure(event(FAILED, invoice(timezone="Asia/Seoul", country=country)))
    assert (metadata.timezone, metadata.timezone_source) == ("Asia/Seoul", "invoice")


@pytest.mark.parametrize("basil", [False, True])
def test_a_failure_names_its_subscription_in_both_shapes(basil: bool) -> None:
    found = failure(event(FAILED, invoice(basil=basil)))
    assert found.subscription_id == "sub_1Pq"
    one_off = invoice(basil=basil)
    one_off.pop("subscription", None)
    one_off.pop("parent", None)
    assert failure(event(FAILED, one_off)).subscription_id is None


def test_a_zone_that_is_none_is_passed_over_noted() -> None:
    found = failure(event(FAILED, invoice(timezone="Mars/Olympus")))
    assert found.timezone == "Europe/Paris"
    assert any("Mars/Olympus" in n for n in found.notes)
    body = invoice(timezone="Mars/Olympus")
    body["subscription_details"] = {"metadata": {"timezone": "Europe/Berlin"}}
    assert failure(event(FAILED, body)).timezone == "Europe/Berlin"


@pytest.mark.parametrize(
    ("given", "kept"), [("us", "US"), ("ZZ", None), ("USA", None), (None, None)]
)
def test_a_country_is_kept_only_when_the_holidays_package_knows_it(
    given: str | None, kept: str | None
) -> None:
    assert failure(event(FAILED, invoice(country=given))).country == kept


def test_the_amount_is_what_remains_owed() -> None:
    body = invoice(amount=5000)
    body["amount_remaining"] = 1200
    assert failure(event(FAILED, body)).amount == 1200
    del body["amount_remaining"]
    assert failure(event(FAILED, body)).amount == 5000


@pytest.mark.parametrize(
    "change",
    [
        {"amount_remaining": 0},
        {"customer": None},
        {"id": None},
        {"currency": "dollars"},
        {"id": "in_" + "x" * 200},  # an id longer than an invoice id may be: never cut
    ],
)
def test_a_failure_that_cannot_be_dunned_is_ignored_saying_why(change: dict[str, Any]) -> None:
    found = read(event(FAILED, {**invoice(), **change}))
    assert isinstance(found, Ignored) and found.why


def test_an_expanded_customer_is_read_by_its_id() -> None:
    body = invoice()
    body["customer"] = customer("cus_Exp4nd")
    assert failure(event(FAILED, body)).customer_id == "cus_Exp4nd"


def test_recoups_own_attempt_is_recognised_by_the_requests_idempotency_key() -> None:
    inv = invoice("in_9")
    assert failure(event(FAILED, inv, idempotency_key="charge:in_9:3")).attempt == 3
    assert failure(event(FAILED, inv, idempotency_key="charge:in_8:3")).attempt is None
    assert failure(event(FAILED, inv, idempotency_key="0b3f1f6e-uuid")).attempt is None
    assert failure(event(FAILED, inv, idempotency_key="charge:in_9:0")).attempt is None
    paid = read(event("invoice.paid", inv, idempotency_key="charge:in_9:2"))
    assert paid == InvoicePaid(invoice_id="in_9", attempt=2)
    # Events of old API versions carry the request as a bare id.
    old = event("invoice.paid", inv)
    old["request"] = "req_1"
    assert recoup_attempt(old, "in_9") is None


@pytest.mark.parametrize("kind", ["invoice.paid", "invoice.payment_succeeded"])
def test_both_payment_events_are_a_payment(kind: str) -> None:
    assert read(event(kind, invoice(status="paid"))) == InvoicePaid(
        invoice_id="in_1PqRsT2eZvKYlo2C", attempt=None
    )


@pytest.mark.parametrize(
    ("previous", "current", "updated"),
    [
        ({"invoice_settings": {"default_payment_method": "pm_old"}}, customer(), True),
        ({"invoice_settings": {"default_payment_method": None}}, customer(), True),
        # The default method removed: nothing to retry with.
        (
            {"invoice_settings": {"default_payment_method": "pm_old"}},
            customer(default_payment_method=None),
            False,
        ),
        ({"email": "old@example.com"}, customer(), False),
        ({"invoice_settings": {"footer": "x"}}, customer(), False),
        ({"default_source": None}, {**customer(), "default_source": "card_1"}, True),
    ],
)
def test_a_customer_update_is_a_card_update_only_when_the_default_method_changed(
    previous: dict[str, Any], current: dict[str, Any], updated: bool
) -> None:
    found = read(event("customer.updated", current, previous=previous))
    assert isinstance(found, CardUpdated if updated else Ignored), found
    if updated:
        assert isinstance(found, CardUpdated) and found.customer_id == "cus_QxYz123"


@pytest.mark.parametrize(
    "kind", ["payment_method.automatically_updated", "payment_method.card_automatically_updated"]
)
def test_a_payment_method_updated_by_the_network_is_its_customers_card_update(kind: str) -> None:
    found = read(event(kind, {"id": "pm_1", "object": "payment_method", "customer": "cus_7"}))
    assert isinstance(found, CardUpdated) and found.customer_id == "cus_7"
    orphan = read(event(kind, {"id": "pm_1", "object": "payment_method", "customer": None}))
    assert isinstance(orphan, Ignored)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("invoice.voided", "invoice_voided"),
        ("invoice.marked_uncollectible", "invoice_marked_uncollectible"),
    ],
)
@pytest.mark.parametrize("basil", [False, True])
def test_a_voided_or_uncollectible_invoice_is_closed_with_its_reason(
    kind: str, reason: str, basil: bool
) -> None:
    status = "void" if kind == "invoice.voided" else "uncollectible"
    found = read(event(kind, invoice(status=status, basil=basil)))
    assert found == InvoiceClosed(invoice_id="in_1PqRsT2eZvKYlo2C", reason=reason)
    nameless = read(event(kind, {**invoice(status=status), "id": None}))
    assert isinstance(nameless, Ignored) and "no id" in nameless.why


@pytest.mark.parametrize("basil", [False, True])
def test_a_deleted_subscription_ends_with_its_customer(basil: bool) -> None:
    found = read(event("customer.subscription.deleted", subscription(status="canceled")))
    assert found == SubscriptionEnded(
        subscription_id="sub_1Pq",
        customer_id="cus_QxYz123",
        reason="subscription_deleted",
        why="subscription sub_1Pq cancelled",
    )
    expanded = subscription(customer=customer("cus_Exp4nd"), status="canceled", basil=basil)
    found = read(event("customer.subscription.deleted", expanded))
    assert isinstance(found, SubscriptionEnded) and found.customer_id == "cus_Exp4nd"


@pytest.mark.parametrize("basil", [False, True])
@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"cancel_at_period_end": True}, "at the end of its period"),
        ({"cancel_at": CREATED + 86_400}, "at 2026-06-24T15:00:00Z"),
        ({"status": "canceled"}, "is canceled"),
        ({"status": "incomplete_expired"}, "is incomplete_expired"),
    ],
)
def test_an_update_that_sets_the_subscription_to_cancel_ends_it(
    basil: bool, fields: dict[str, Any], why: str
) -> None:
    found = read(
        event(
            "customer.subscription.updated",
            subscription(basil=basil, **fields),
            previous={"cancel_at_period_end": False},
        )
    )
    assert isinstance(found, SubscriptionEnded), found
    assert (found.subscription_id, found.customer_id) == ("sub_1Pq", "cus_QxYz123")
    assert found.reason == "subscription_set_to_cancel" and why in found.why


@pytest.mark.parametrize(
    "fields",
    [
        {},  # a plan change, a new quantity
        {"status": "past_due"},
        {"cancel_at_period_end": False},  # a cancellation undone
        {"cancel_at": "soon"},  # not an instant
    ],
)
def test_an_update_that_does_not_set_it_to_cancel_is_ignored_saying_so(
    fields: dict[str, Any],
) -> None:
    found = read(event("customer.subscription.updated", subscription(**fields)))
    assert isinstance(found, Ignored) and "does not set subscription sub_1Pq to cancel" in found.why


def test_a_subscription_without_id_or_customer_is_ignored() -> None:
    for change in ({"id": None}, {"customer": None}):
        found = read(event("customer.subscription.deleted", {**subscription(), **change}))
        assert isinstance(found, Ignored) and "no id or no customer" in found.why


@pytest.mark.parametrize("basil", [False, True])
def test_payment_action_required_is_a_failure_needing_the_customer(basil: bool) -> None:
    body = event(ACTION, invoice(basil=basil), api_version=BASIL if basil else "2024-06-20")
    found = failure(body)
    assert found.decline_code == "authentication_required" and found.attempt is None
    assert (found.amount, found.timezone) == (1999, "America/Chicago")
    assert any("must authenticate" in n for n in found.notes)
    assert not any("no decline code" in n for n in found.notes)
    # Even when its payment, expanded, tells another code.
    expanded = failure(event(ACTION, invoice(intent=payment_intent(), basil=basil)))
    assert expanded.decline_code == "authentication_required"
    assert expanded.card_fingerprint == "fp_Q1w2E3r4"


def test_payment_action_required_of_recoups_attempt_is_that_attempt() -> None:
    found = failure(event(ACTION, invoice("in_9"), idempotency_key="charge:in_9:2"))
    assert (found.attempt, found.decline_code) == (2, "authentication_required")


def test_every_new_type_is_supported() -> None:
    assert {
        ACTION,
        "invoice.voided",
        "invoice.marked_uncollectible",
        "customer.subscription.deleted",
        "customer.subscription.updated",
    } <= set(SUPPORTED)


def test_other_types_are_ignored() -> None:
    found = read(event("charge.refunded", {"id": "ch_1", "object": "charge"}))
    assert isinstance(found, Ignored) and "charge.refunded" in found.why


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"id": None}, "id"),
        ({"type": 7}, "type"),
        ({"created": "yesterday"}, "created"),
        ({"created": 10**20}, "created"),
        ({"created": -1}, "created"),
    ],
)
def test_an_event_without_its_head_is_invalid_input_naming_the_field(
    change: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        event_head({**event(FAILED, invoice()), **change})
    assert caught.value.field == field


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = st.sampled_from(
    [
        "id", "customer", "currency", "amount_due", "amount_remaining", "metadata", "charge",
        "payment_intent", "payments", "customer_address", "parent", "subscription_details",
        "invoice_settings", "default_source", "status", "cancel_at", "cancel_at_period_end",
        "subscription",
    ]
)  # fmt: skip
TYPES = st.sampled_from(
    [
        FAILED,
        ACTION,
        "invoice.paid",
        "invoice.payment_succeeded",
        "invoice.voided",
        "invoice.marked_uncollectible",
        "customer.subscription.deleted",
        "customer.subscription.updated",
        "customer.updated",
        "payment_method.automatically_updated",
        "ping",
    ]
)


@given(
    kind=TYPES,
    obj=st.dictionaries(FIELDS, JSON, max_size=10),
    previous=JSON,
    created=st.integers(0, 2**33),
)
def test_no_shape_of_object_makes_the_reader_fail_and_a_failure_is_at_created(
    kind: str, obj: dict[str, Any], previous: Any, created: int
) -> None:
    body = event(kind, obj, created=created)
    body["data"]["previous_attributes"] = previous
    found = read(body)
    assert isinstance(
        found,
        InvoiceFailed | InvoicePaid | InvoiceClosed | SubscriptionEnded | CardUpdated | Ignored,
    )
    if isinstance(found, InvoiceFailed):
        assert found.failed_at == datetime.fromtimestamp(created, UTC)
        assert found.amount > 0 and len(found.currency) == 3


def test_a_failure_carries_the_invoices_hosted_page_only_when_it_is_https() -> None:
    page = "https://invoice.stripe.com/i/acct_1M/test_YWNjdA"
    body = invoice(intent=payment_intent())
    assert failure(event(FAILED, {**body, "hosted_invoice_url": page})).hosted_invoice_url == page
    plain = {**body, "hosted_invoice_url": "http://invoice.example/i/1"}
    assert failure(event(FAILED, plain)).hosted_invoice_url is None
    assert failure(event(FAILED, body)).hosted_invoice_url is None
