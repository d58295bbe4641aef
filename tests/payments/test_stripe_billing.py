"""The Stripe client (recoup.payments.stripe_billing) against a real localstripe through the
official SDK, with faults injected between them; what localstripe lacks (mark_uncollectible,
pause_collection, Stripe's 402 card error, the basil invoice shapes) against a recording
server that answers as Stripe does, checking the requests the SDK sends."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import stripe

import recoup
from recoup.payments.stripe_billing import (
    ActionOutcome,
    StripeBilling,
    StripeLookupFailed,
    StripeOutcome,
)
from recoup.recovery.stripe_events import InvoiceFailed, event_head, read_event
from tests.support_stripe import (
    AUTHENTICATING_CARD,
    GOOD_CARD,
    TEST_KEY,
    FaultKind,
    FaultProxy,
    LocalStripe,
    RecordingStripe,
    WebhookSink,
    billing_through,
    customer_with_card,
    draft_invoice,
    failed_subscription,
    register_webhook,
    replace_card,
    signed_event,
    stripe_invoice,
    stripe_subscription,
    subscription,
    succeeded_charges,
)

PAY = r"/v1/invoices/\w+/pay"
IN_DOUBT_TIMEOUT = 1.0  # seconds the client waits on a hanging proxy before it gives up


@pytest.fixture
def billing(localstripe: LocalStripe) -> Iterator[StripeBilling]:
    with billing_through(localstripe.url) as client:
        yield client


@pytest.fixture
def proxy(localstripe: LocalStripe) -> Iterator[FaultProxy]:
    with FaultProxy(localstripe.url) as faulty:
        yield faulty


@pytest.fixture
def proxied(proxy: FaultProxy) -> Iterator[StripeBilling]:
    """A client that reaches localstripe through the fault proxy."""
    with billing_through(proxy.url) as client:
        yield client


@pytest.fixture
def impatient(proxy: FaultProxy) -> Iterator[StripeBilling]:
    """A client through the fault proxy that gives up quickly: for the calls left hanging
    (the rest go by `proxied`, patient enough for a loaded machine)."""
    with billing_through(proxy.url, timeout=IN_DOUBT_TIMEOUT) as client:
        yield client


@pytest.fixture
def recording() -> Iterator[RecordingStripe]:
    with RecordingStripe() as server:
        yield server


@pytest.fixture
def recorded(recording: RecordingStripe) -> Iterator[StripeBilling]:
    with billing_through(recording.url) as client:
        yield client


# Paying at localstripe


def test_a_good_card_pays_the_invoice_and_a_second_pay_is_paid_elsewhere(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling
) -> None:
    failed = failed_subscription(stripe_sdk)
    replace_card(stripe_sdk, failed.customer_id, GOOD_CARD)

    paid = billing.pay(failed.invoice_id, idempotency_key=f"charge:{failed.invoice_id}:1")
    again = billing.pay(failed.invoice_id, idempotency_key=f"charge:{failed.invoice_id}:2")

    assert (paid.outcome, paid.invoice_status) == (StripeOutcome.SUCCEEDED, "paid")
    assert paid.charge_id is not None and paid.charge_id.startswith("ch_")
    assert (again.outcome, again.invoice_status) == (StripeOutcome.PAID_ELSEWHERE, "paid")
    assert again.charge_id == paid.charge_id
    assert "already paid" in (again.detail or "")
    assert succeeded_charges(stripe_sdk, failed.customer_id) == 1


def test_a_declining_card_is_declined_with_its_code_and_the_look_up_says_so_too(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling
) -> None:
    failed = failed_subscription(stripe_sdk)

    declined = billing.pay(failed.invoice_id, idempotency_key="charge:x:1")
    seen = billing.look_up(failed.invoice_id)
    since = billing.look_up(failed.invoice_id, previous_charge_id=declined.charge_id)

    # localstripe's shape: 200, the invoice still open, the decline on its charge
    assert declined.outcome is StripeOutcome.DECLINED
    assert (declined.invoice_status, declined.decline_code) == ("open", "card_declined")
    assert declined.detail == "Your card was declined."
    assert (seen.outcome, seen.charge_id) == (StripeOutcome.DECLINED, declined.charge_id)
    assert since.outcome is StripeOutcome.NOT_CHARGED  # no charge newer than the one seen


def test_a_void_invoice_is_closed(stripe_sdk: stripe.StripeClient, billing: StripeBilling) -> None:
    failed = failed_subscription(stripe_sdk)
    stripe_sdk.v1.invoices.void_invoice(failed.invoice_id)

    paid = billing.pay(failed.invoice_id, idempotency_key="charge:x:1")

    # localstripe answers a bare 400 "Bad request": the invoice's own status says why
    assert (paid.outcome, paid.invoice_status) == (StripeOutcome.CLOSED, "void")
    assert billing.look_up(failed.invoice_id).outcome is StripeOutcome.CLOSED


def test_an_invoice_that_does_not_exist_is_closed_as_deleted(billing: StripeBilling) -> None:
    paid = billing.pay("in_deleted", idempotency_key="charge:in_deleted:1")

    assert (paid.outcome, paid.invoice_status) == (StripeOutcome.CLOSED, "deleted")


def test_a_card_that_needs_authentication_is_action_required(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling
) -> None:
    failed = failed_subscription(stripe_sdk)
    replace_card(stripe_sdk, failed.customer_id, AUTHENTICATING_CARD)

    paid = billing.pay(failed.invoice_id, idempotency_key="charge:x:1")

    assert (paid.outcome, paid.invoice_status) == (StripeOutcome.ACTION_REQUIRED, "open")
    assert billing.look_up(failed.invoice_id).outcome is StripeOutcome.ACTION_REQUIRED


def test_a_draft_invoice_is_not_charged_until_paid(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling
) -> None:
    subscribed = subscription(stripe_sdk, customer_with_card(stripe_sdk, GOOD_CARD))
    draft = draft_invoice(stripe_sdk, subscribed)

    assert billing.look_up(draft).outcome is StripeOutcome.NOT_CHARGED
    assert billing.pay(draft, idempotency_key="charge:x:1").outcome is StripeOutcome.SUCCEEDED


# Calls in doubt, through the fault proxy


@pytest.mark.parametrize("fault", [FaultKind.HANG_AFTER, FaultKind.DROP_AFTER])
def test_an_answer_lost_after_the_charge_is_in_doubt_and_the_look_up_finds_the_payment(
    stripe_sdk: stripe.StripeClient,
    proxy: FaultProxy,
    proxied: StripeBilling,
    impatient: StripeBilling,
    fault: FaultKind,
) -> None:
    failed = failed_subscription(stripe_sdk)
    replace_card(stripe_sdk, failed.customer_id, GOOD_CARD)
    proxy.inject(fault, PAY)

    paid = impatient.pay(failed.invoice_id, idempotency_key="charge:x:1")
    found = proxied.look_up(failed.invoice_id)
    again = proxied.pay(failed.invoice_id, idempotency_key="charge:x:1")  # a careless retry

    assert paid.outcome is StripeOutcome.IN_DOUBT
    assert paid.decline_code is None
    assert (found.outcome, found.invoice_status) == (StripeOutcome.SUCCEEDED, "paid")
    assert again.outcome is StripeOutcome.PAID_ELSEWHERE
    assert proxy.forwarded(PAY) == 2
    assert succeeded_charges(stripe_sdk, failed.customer_id) == 1


def test_a_timeout_before_the_call_reached_stripe_is_in_doubt_and_nothing_was_charged(
    stripe_sdk: stripe.StripeClient,
    proxy: FaultProxy,
    proxied: StripeBilling,
    impatient: StripeBilling,
) -> None:
    subscribed = subscription(stripe_sdk, customer_with_card(stripe_sdk, GOOD_CARD))
    draft = draft_invoice(stripe_sdk, subscribed)
    proxy.inject(FaultKind.HANG_BEFORE, PAY)

    paid = impatient.pay(draft, idempotency_key="charge:x:1")
    found = proxied.look_up(draft)

    assert paid.outcome is StripeOutcome.IN_DOUBT
    assert (paid.detail or "").startswith("network error: ReadTimeout")
    assert (found.outcome, found.invoice_status) == (StripeOutcome.NOT_CHARGED, "draft")
    assert proxy.forwarded(PAY) == 0
    assert succeeded_charges(stripe_sdk, subscribed.customer_id) == 1  # the first invoice's


@pytest.mark.parametrize("status", [429, 500, 503])
def test_a_rate_limit_or_server_error_is_in_doubt_never_a_decline(
    stripe_sdk: stripe.StripeClient, proxy: FaultProxy, proxied: StripeBilling, status: int
) -> None:
    failed = failed_subscription(stripe_sdk)
    proxy.inject(FaultKind.STATUS, PAY, status=status)

    paid = proxied.pay(failed.invoice_id, idempotency_key="charge:x:1")

    assert paid.outcome is StripeOutcome.IN_DOUBT
    assert paid.decline_code is None
    assert f"HTTP {status}" in (paid.detail or "")
    assert proxy.forwarded(PAY) == 0


def test_a_look_up_that_fails_is_in_doubt(
    stripe_sdk: stripe.StripeClient, proxy: FaultProxy, proxied: StripeBilling
) -> None:
    failed = failed_subscription(stripe_sdk)
    proxy.inject(FaultKind.STATUS, r"/v1/invoices/\w+", method="GET", status=502)

    found = proxied.look_up(failed.invoice_id)

    assert found.outcome is StripeOutcome.IN_DOUBT
    assert found.detail is not None and found.detail.startswith("look-up failed")


# Facts and final actions at localstripe


def test_the_failure_facts_come_from_the_invoice_its_card_customer_and_subscription(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling
) -> None:
    failed = failed_subscription(
        stripe_sdk, metadata={"timezone": "Europe/Paris"}, country="fr", amount=2500
    )

    facts = billing.failure_facts(failed.invoice_id)

    assert (facts.customer_id, facts.subscription_id) == (
        failed.customer_id,
        failed.subscription_id,
    )
    assert (facts.amount_remaining, facts.currency, facts.invoice_status) == (2500, "usd", "open")
    assert (facts.decline_code, facts.advice_code) == ("card_declined", None)
    assert (facts.card_brand, facts.card_network) == ("visa", "visa")
    assert facts.card_fingerprint
    assert facts.customer_country == "FR"
    assert (facts.timezone, facts.timezone_source) == ("Europe/Paris", "subscription")
    assert facts.charge_id is not None and facts.notes == ()


def test_the_customers_zone_is_used_when_invoice_and_subscription_name_none(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling
) -> None:
    failed = failed_subscription(stripe_sdk, customer_metadata={"timezone": "Asia/Tokyo"})

    facts = billing.failure_facts(failed.invoice_id)

    assert (facts.timezone, facts.timezone_source) == ("Asia/Tokyo", "customer")


def test_the_facts_of_an_invoice_that_cannot_be_read_raise_saying_whether_to_retry(
    billing: StripeBilling,
) -> None:
    with pytest.raises(StripeLookupFailed) as raised:
        billing.failure_facts("in_missing")

    assert raised.value.retry is False


def test_an_invoices_subscription_is_read_from_it_and_a_missing_invoice_raises(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling
) -> None:
    failed = failed_subscription(stripe_sdk)

    assert billing.subscription_of(failed.invoice_id) == failed.subscription_id
    with pytest.raises(StripeLookupFailed) as raised:
        billing.subscription_of("in_missing")
    assert raised.value.retry is False


def test_a_basil_invoice_names_its_subscription_under_parent() -> None:
    parent = {"type": "subscription_details", "subscription_details": {"subscription": "sub_9"}}
    with RecordingStripe() as recording:
        recording.on("GET", "/v1/invoices/in_1", (200, stripe_invoice("in_1", parent=parent)))
        recording.on("GET", "/v1/invoices/in_2", (200, stripe_invoice("in_2")))
        recording.on("GET", "/v1/invoices/in_3", (503, {"error": {"type": "api_error"}}))
        with billing_through(recording.url) as billing:
            assert billing.subscription_of("in_1") == "sub_9"
            assert billing.subscription_of("in_2") is None  # a one-off invoice
            with pytest.raises(StripeLookupFailed) as raised:
                billing.subscription_of("in_3")
    assert raised.value.retry is True


def test_a_subscription_is_canceled_once_and_a_second_cancel_is_already_done(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling, localstripe: LocalStripe
) -> None:
    subscribed = subscription(stripe_sdk, customer_with_card(stripe_sdk, GOOD_CARD))

    first = billing.cancel_subscription(subscribed.subscription_id, idempotency_key="cancel:1")
    second = billing.cancel_subscription(subscribed.subscription_id, idempotency_key="cancel:2")

    assert (first.outcome, first.status, first.ok) == (ActionOutcome.DONE, "canceled", True)
    assert (second.outcome, second.ok, second.retry) == (ActionOutcome.ALREADY_DONE, True, False)
    assert stripe_sdk.v1.subscriptions.retrieve(subscribed.subscription_id).status == "canceled"


def test_localstripe_has_no_pause_collection_and_the_failure_is_a_value(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling
) -> None:
    subscribed = subscription(stripe_sdk, customer_with_card(stripe_sdk, GOOD_CARD))

    paused = billing.pause_collection(subscribed.subscription_id, idempotency_key="pause:1")
    resumed = billing.resume_collection(subscribed.subscription_id, idempotency_key="resume:1")

    # localstripe answers 500 to an update naming pause_collection: retryable, not raised
    assert (paused.outcome, paused.retry) == (ActionOutcome.FAILED, True)
    assert resumed.outcome is ActionOutcome.ALREADY_DONE  # never paused: nothing sent


def test_the_check_says_the_key_works_in_test_mode(billing: StripeBilling) -> None:
    checked = billing.check()

    assert (checked.ok, checked.livemode, checked.retry) == (True, False, False)


def test_the_check_through_a_server_error_says_retry(
    proxy: FaultProxy, proxied: StripeBilling
) -> None:
    proxy.inject(FaultKind.STATUS, "/v1/invoices", method="GET", status=500)

    checked = proxied.check()

    assert (checked.ok, checked.retry) == (False, True)


# Webhooks


def test_localstripe_sends_a_signed_invoice_payment_succeeded_when_a_pay_succeeds(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling, localstripe: LocalStripe
) -> None:
    secret = "whsec_harness"
    with WebhookSink() as sink:
        register_webhook(
            localstripe.url, "recoup-test", sink.url, secret, ["invoice.payment_succeeded"]
        )
        failed = failed_subscription(stripe_sdk)
        replace_card(stripe_sdk, failed.customer_id, GOOD_CARD)
        billing.pay(failed.invoice_id, idempotency_key="charge:x:1")

        delivery = sink.wait_for("invoice.payment_succeeded", failed.invoice_id)

    event = stripe.Webhook.construct_event(
        delivery.payload.decode(), delivery.signature or "", secret
    )
    invoice = event["data"]["object"]
    assert event["api_version"] == "2017-08-15"
    assert (invoice["id"], invoice["status"]) == (failed.invoice_id, "paid")
    assert invoice["subscription"] == failed.subscription_id  # at the top level (2017 shape)
    assert invoice["charge"]["status"] == "succeeded"  # the charge expanded
    assert "request" not in delivery.event  # so no idempotency key to recognise an attempt by


def test_a_signed_payment_failed_event_verifies_with_the_sdk_and_reads_as_attempt_n(
    stripe_sdk: stripe.StripeClient, billing: StripeBilling
) -> None:
    failed = failed_subscription(stripe_sdk)
    invoice = stripe_sdk.v1.invoices.retrieve(failed.invoice_id).to_dict()
    secret = "whsec_built"

    payload, headers = signed_event(
        "invoice.payment_failed",
        invoice,
        secret,
        idempotency_key=f"charge:{failed.invoice_id}:3",
    )
    event = stripe.Webhook.construct_event(
        payload.decode(), headers["Stripe-Signature"], secret
    ).to_dict()
    reading = read_event(event_head(event), default_timezone="UTC")

    assert isinstance(reading, InvoiceFailed)
    assert (reading.invoice_id, reading.attempt, reading.amount) == (failed.invoice_id, 3, 1999)


# What localstripe lacks, against the requests the SDK sends


def test_mark_uncollectible_sends_the_key_and_nothing_else_then_is_already_done(
    recording: RecordingStripe, recorded: StripeBilling
) -> None:
    path = "/v1/invoices/in_1"
    recording.on(
        "GET", path, (200, stripe_invoice()), (200, stripe_invoice(status="uncollectible"))
    )
    recording.on(
        "POST", f"{path}/mark_uncollectible", (200, stripe_invoice(status="uncollectible"))
    )

    first = recorded.mark_uncollectible("in_1", idempotency_key="final:in_1:uncollectible")
    second = recorded.mark_uncollectible("in_1", idempotency_key="final:in_1:uncollectible")

    assert (first.outcome, first.status) == (ActionOutcome.DONE, "uncollectible")
    assert first.request_id is not None and first.request_id.startswith("req_")
    assert second.outcome is ActionOutcome.ALREADY_DONE
    [posted] = recording.sent("POST")
    assert (posted.path, posted.form) == (f"{path}/mark_uncollectible", [])
    assert posted.idempotency_key == "final:in_1:uncollectible"


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("open", "uncollectible", ActionOutcome.ALREADY_DONE),  # written off meanwhile
        ("open", "open", ActionOutcome.REFUSED),  # Stripe refused, and it is still open
    ],
)
def test_a_refused_mark_uncollectible_is_read_again(
    recording: RecordingStripe,
    recorded: StripeBilling,
    before: str,
    after: str,
    expected: ActionOutcome,
) -> None:
    refusal = {"error": {"type": "invalid_request_error", "message": "Invoice can't be marked"}}
    recording.on(
        "GET",
        "/v1/invoices/in_1",
        (200, stripe_invoice(status=before)),
        (200, stripe_invoice(status=after)),
    )
    recording.on("POST", "/v1/invoices/in_1/mark_uncollectible", (400, refusal))

    result = recorded.mark_uncollectible("in_1", idempotency_key="k")

    assert (result.outcome, result.retry) == (expected, False)


def test_a_paid_invoice_is_not_written_off_and_nothing_is_sent(
    recording: RecordingStripe, recorded: StripeBilling
) -> None:
    recording.on("GET", "/v1/invoices/in_1", (200, stripe_invoice(status="paid")))

    result = recorded.mark_uncollectible("in_1", idempotency_key="k")

    assert (result.outcome, result.detail) == (ActionOutcome.REFUSED, "the invoice is paid")
    assert recording.sent("POST") == []


def test_pause_collection_keeps_invoices_as_drafts_and_resume_clears_it(
    recording: RecordingStripe, recorded: StripeBilling
) -> None:
    path = "/v1/subscriptions/sub_1"
    paused = stripe_subscription(pause_collection={"behavior": "keep_as_draft", "resumes_at": None})
    recording.on("GET", path, (200, stripe_subscription()), (200, paused))
    recording.on("POST", path, (200, paused), (200, stripe_subscription()))

    pause = recorded.pause_collection("sub_1", idempotency_key="final:sub_1:pause")
    resume = recorded.resume_collection("sub_1", idempotency_key="final:sub_1:resume")

    assert (pause.outcome, resume.outcome) == (ActionOutcome.DONE, ActionOutcome.DONE)
    first, second = recording.sent("POST")
    assert first.form == [("pause_collection[behavior]", "keep_as_draft")]
    assert first.idempotency_key == "final:sub_1:pause"
    assert second.form == [("pause_collection", "")]
    assert second.idempotency_key == "final:sub_1:resume"


def test_a_paused_subscription_is_already_paused_and_an_ended_one_refused(
    recording: RecordingStripe, recorded: StripeBilling
) -> None:
    paused = stripe_subscription(pause_collection={"behavior": "keep_as_draft"})
    recording.on("GET", "/v1/subscriptions/sub_1", (200, paused))
    recording.on("GET", "/v1/subscriptions/sub_2", (200, stripe_subscription("sub_2", "canceled")))

    again = recorded.pause_collection("sub_1", idempotency_key="k")
    ended = recorded.pause_collection("sub_2", idempotency_key="k")

    assert again.outcome is ActionOutcome.ALREADY_DONE
    assert (ended.outcome, ended.detail) == (ActionOutcome.REFUSED, "the subscription is canceled")
    assert recording.sent("POST") == []


def test_a_cancel_that_times_out_is_retryable(recording: RecordingStripe) -> None:
    recording.on("GET", "/v1/subscriptions/sub_1", (200, stripe_subscription()))
    with (
        FaultProxy(recording.url) as proxy,
        billing_through(proxy.url, timeout=IN_DOUBT_TIMEOUT) as billing,
    ):
        proxy.inject(FaultKind.HANG_BEFORE, "/v1/subscriptions/sub_1", method="DELETE")

        result = billing.cancel_subscription("sub_1", idempotency_key="k")

    assert (result.outcome, result.retry) == (ActionOutcome.FAILED, True)


def card_error(**fields: Any) -> dict[str, Any]:
    """Stripe's 402 body of a declined card."""
    return {
        "error": {
            "type": "card_error",
            "code": "card_declined",
            "message": "Your card was declined.",
            "charge": "ch_1",
            **fields,
        }
    }


@pytest.mark.parametrize(
    ("error", "decline", "advice"),
    [
        # the issuer's reason and Stripe's advice
        (
            card_error(decline_code="insufficient_funds", advice_code="try_again_later"),
            "insufficient_funds",
            "try_again_later",
        ),
        # a Mastercard card's network advice (a MAC) when Stripe gives no advice of its own
        (
            card_error(
                decline_code="do_not_honor",
                network_advice_code="03",
                payment_method={"card": {"brand": "mastercard"}},
            ),
            "do_not_honor",
            "mac:03",
        ),
        # no decline code: the error's code says it
        (card_error(code="expired_card"), "expired_card", None),
        (card_error(), "card_declined", None),
    ],
)
def test_a_402_card_error_is_declined_with_its_codes(
    recording: RecordingStripe,
    recorded: StripeBilling,
    error: dict[str, Any],
    decline: str,
    advice: str | None,
) -> None:
    recording.on("POST", "/v1/invoices/in_1/pay", (402, error))

    paid = recorded.pay("in_1", idempotency_key="charge:in_1:2")

    assert (paid.outcome, paid.decline_code, paid.advice_code) == (
        StripeOutcome.DECLINED,
        decline,
        advice,
    )
    assert paid.charge_id == "ch_1"
    assert paid.request_id is not None
    [sent] = recording.sent()
    assert (sent.method, sent.form, sent.idempotency_key) == ("POST", [], "charge:in_1:2")


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (402, card_error(code="authentication_required", decline_code="authentication_required")),
        (
            400,
            {
                "error": {
                    "type": "invalid_request_error",
                    "code": "invoice_payment_intent_requires_action",
                    "message": "This payment requires additional user action.",
                }
            },
        ),
    ],
)
def test_authentication_required_is_action_required(
    recording: RecordingStripe, recorded: StripeBilling, status: int, error: dict[str, Any]
) -> None:
    recording.on("POST", "/v1/invoices/in_1/pay", (status, error))

    paid = recorded.pay("in_1", idempotency_key="k")

    assert paid.outcome is StripeOutcome.ACTION_REQUIRED


def test_a_pay_refused_on_an_open_invoice_is_refused(
    recording: RecordingStripe, recorded: StripeBilling
) -> None:
    refusal = {"error": {"type": "invalid_request_error", "message": "no payment method"}}
    recording.on("POST", "/v1/invoices/in_1/pay", (400, refusal))
    recording.on(
        "GET", "/v1/invoices/in_1", (200, stripe_invoice(payment_intent=None, charge=None))
    )

    paid = recorded.pay("in_1", idempotency_key="k")

    assert (paid.outcome, paid.invoice_status) == (StripeOutcome.REFUSED, "open")
    assert paid.hosted_invoice_url == "https://invoice.stripe.com/i/acct_1/in_1"


def test_the_look_up_reads_a_basil_invoice_through_its_payments(
    recording: RecordingStripe, recorded: StripeBilling
) -> None:
    recording.on("GET", "/v1/invoices/in_1", (200, stripe_invoice()))
    recording.on(
        "GET",
        "/v1/invoice_payments",
        (
            200,
            {
                "object": "list",
                "data": [{"payment": {"type": "payment_intent", "payment_intent": "pi_1"}}],
            },
        ),
    )
    last_error = {
        "type": "card_error",
        "code": "card_declined",
        "decline_code": "insufficient_funds",
        "advice_code": "try_again_later",
    }
    recording.on(
        "GET",
        "/v1/payment_intents/pi_1",
        (
            200,
            {
                "id": "pi_1",
                "object": "payment_intent",
                "status": "requires_payment_method",
                "latest_charge": "ch_9",
                "last_payment_error": last_error,
            },
        ),
    )
    recording.on(
        "GET",
        "/v1/charges/ch_9",
        (
            200,
            {"id": "ch_9", "object": "charge", "status": "failed", "failure_code": "card_declined"},
        ),
    )

    found = recorded.look_up("in_1")

    assert (found.outcome, found.charge_id) == (StripeOutcome.DECLINED, "ch_9")
    assert (found.decline_code, found.advice_code) == ("insufficient_funds", "try_again_later")
    [listed] = recording.sent("GET", "/v1/invoice_payments")
    assert ("invoice", "in_1") in listed.query


def test_the_api_key_is_in_no_repr_message_or_exception(recording: RecordingStripe) -> None:
    secret = "sk_test_SuperSecretKey0123456789"
    unauthorized = {
        "error": {"type": "invalid_request_error", "message": f"Invalid API Key provided: {secret}"}
    }
    for method, path in (
        ("POST", "/v1/invoices/in_1/pay"),
        ("GET", "/v1/invoices/in_1"),
        ("GET", "/v1/invoices"),
        ("GET", "/v1/subscriptions/sub_1"),
    ):
        recording.on(method, path, (401, unauthorized))

    with StripeBilling(secret, api_base=recording.url, timeout=2) as billing:
        texts = [repr(billing), str(billing)]
        texts.append(repr(billing.pay("in_1", idempotency_key="k")))
        texts.append(repr(billing.look_up("in_1")))
        texts.append(repr(billing.check()))
        texts.append(repr(billing.cancel_subscription("sub_1", idempotency_key="k")))
        with pytest.raises(StripeLookupFailed) as raised:
            billing.failure_facts("in_1")
        texts += [str(raised.value), repr(raised.value)]

    assert all(secret not in text for text in texts), texts
    assert any("[api key]" in text for text in texts)
    assert recording.requests[0].authorization == f"Bearer {secret}"  # it was sent, only there


def test_a_second_localstripe_starts_on_its_own_port_and_stops() -> None:
    with LocalStripe() as other:
        assert other.url.startswith("http://127.0.0.1:")
        with StripeBilling(TEST_KEY, api_base=other.url) as billing:
            assert billing.check().ok
    assert not other._answers()


def test_the_stripe_sdk_is_imported_only_by_the_client_and_the_intake_route() -> None:
    package = Path(recoup.__file__).parent
    importers = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if re.search(r"^\s*(import stripe\b|from stripe\b)", path.read_text(), re.MULTILINE)
    }

    assert importers == {"payments/stripe_billing.py", "api/routes/intake.py"}
