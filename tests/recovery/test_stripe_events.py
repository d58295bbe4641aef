"""Reading Stripe events (recoup.recovery.stripe_events): which fields of the payloads as
Stripe sends them become the failure, the payment and the card update; and that no shape of
event makes the reader fail."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import InvalidInput
from recoup.recovery.stripe_events import (
    CardUpdated,
    Ignored,
    InvoiceFailed,
    InvoicePaid,
    Reading,
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
)

FAILED = "invoice.payment_failed"


def read(body: dict[str, Any], default: str = "Europe/Paris") -> Reading:
    return read_event(event_head(body), default_timezone=default)


def failure(body: dict[str, Any], default: str = "Europe/Paris") -> InvoiceFailed:
    found = read(body, default)
    assert isinstance(found, InvoiceFailed), found
    return found


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
        "invoice_settings", "default_source",
    ]
)  # fmt: skip
TYPES = st.sampled_from(
    [
        FAILED,
        "invoice.paid",
        "invoice.payment_succeeded",
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
    assert isinstance(found, InvoiceFailed | InvoicePaid | CardUpdated | Ignored)
    if isinstance(found, InvoiceFailed):
        assert found.failed_at == datetime.fromtimestamp(created, UTC)
        assert found.amount > 0 and len(found.currency) == 3
