"""HostedCharger (recoup.recovery.hosted_charging) on a real ledger, on both backends, against
localstripe through the fault proxy (what Stripe does with a pay) and a recording server (what
localstripe cannot say: a 402 with its codes, a refusal); every Stripe request counted."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import stripe
from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.dunning.invoice import Invoice, InvoiceState
from recoup.recovery.hosted_charging import HostedAnswer, HostedCharger, StripeAccounts
from recoup.recovery.hosted_store import (
    STRIPE_CHARGE_TARGET,
    HostedCharge,
    HostedChargeState,
    HostedCharging,
)
from recoup.sealed import SecretBox
from recoup.timekeeping.clock import VirtualClock
from tests import support_stripe
from tests.storage.conftest import Store
from tests.storage.test_dunning_store import TENANT
from tests.storage.test_dunning_store import invoice as make_invoice
from tests.support_stripe import (
    AUTHENTICATING_CARD,
    GOOD_CARD,
    TEST_KEY,
    FaultKind,
    FaultProxy,
    LocalStripe,
    RecordingStripe,
    customer_with_card,
    failed_subscription,
    replace_card,
    stripe_invoice,
    subscription,
    succeeded_charges,
)

PAY = r"/v1/invoices/\w+/pay"
localstripe = support_stripe.localstripe  # the fixtures: one localstripe for the module
stripe_sdk = support_stripe.stripe_sdk
IMPATIENT = 1.0  # seconds a client waits on a hanging proxy
T0 = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)
BOX = SecretBox([os.environ["RECOUP_SECRET_KEY"]])
CHARGING = HostedCharging(
    tenant=TENANT, provider="stripe", api_key=BOX.seal(TEST_KEY), updated_at=T0
)


def held(invoice_id: str, state: InvoiceState = InvoiceState.RETRYING) -> Invoice:
    """The invoice as Recoup holds it, charged through Stripe."""
    return make_invoice(invoice_id, charge_url=STRIPE_CHARGE_TARGET, state=state)


class Charging:
    """A charger over the test's store, its Stripe through `url`."""

    def __init__(self, store: Store, url: str, *, timeout: float = 10.0) -> None:
        self.clock = VirtualClock(T0)
        self.accounts = StripeAccounts(BOX, api_base=url, timeout=timeout)
        self.charger = HostedCharger(store.hosted, self.accounts, now=self.clock.now)
        self.store = store

    def charge(self, invoice: Invoice, n: int = 1, *, may_pay: bool = True) -> HostedAnswer:
        self.clock.advance(timedelta(minutes=1))
        return self.charger.charge(CHARGING, invoice, n, may_pay=may_pay)

    def ledger(self, invoice_id: str, n: int = 1) -> HostedCharge:
        found = self.store.hosted.get_hosted_charge(TENANT, f"charge:{invoice_id}:{n}")
        assert found is not None
        return found


@pytest.fixture
def proxy(localstripe: LocalStripe) -> Iterator[FaultProxy]:
    with FaultProxy(localstripe.url) as faulty:
        yield faulty


@pytest.fixture
def through(store: Store, proxy: FaultProxy) -> Iterator[Charging]:
    charging = Charging(store, proxy.url)
    yield charging
    charging.accounts.close()


@pytest.fixture
def impatient(store: Store, proxy: FaultProxy) -> Iterator[Charging]:
    """A charger through the proxy that gives up quickly (for the hanging faults)."""
    charging = Charging(store, proxy.url, timeout=IMPATIENT)
    yield charging
    charging.accounts.close()


@pytest.fixture
def recording() -> Iterator[RecordingStripe]:
    with RecordingStripe() as server:
        yield server


@pytest.fixture
def recorded(store: Store, recording: RecordingStripe) -> Iterator[Charging]:
    charging = Charging(store, recording.url)
    yield charging
    charging.accounts.close()


def declined_with_good_card(client: stripe.StripeClient) -> tuple[str, str]:
    """An open invoice after a decline whose customer now has a good card: (invoice, customer)."""
    failed = failed_subscription(client)
    replace_card(client, failed.customer_id, GOOD_CARD)
    return failed.invoice_id, failed.customer_id


# The ledger first


def test_a_settled_ledger_row_is_replayed_without_a_stripe_call(
    store: Store, through: Charging, proxy: FaultProxy
) -> None:
    begun = store.hosted.begin_hosted_charge(
        HostedCharge(
            tenant=TENANT,
            charge_key="charge:in_done:1",
            invoice_id="in_done",
            attempt=1,
            state=HostedChargeState.PENDING,
            created_at=T0,
            updated_at=T0,
        )
    )
    store.hosted.record_hosted_charge(
        replace(
            begun,
            state=HostedChargeState.DECLINED,
            decline_code="insufficient_funds",
            advice_code="try_again_later",
            request_id="req_old",
            calls=1,
        )
    )

    answer = through.charge(held("in_done"))

    assert (answer.outcome, answer.decline_code, answer.advice_code) == (
        "failed",
        "insufficient_funds",
        "try_again_later",
    )
    assert (answer.request_id, answer.detail) == ("req_old", "as recorded")
    assert proxy.requests == []


# A first pay reads the invoice first


def test_a_first_pay_of_an_invoice_paid_already_pays_nothing(
    stripe_sdk: stripe.StripeClient, through: Charging, proxy: FaultProxy
) -> None:
    paid = subscription(stripe_sdk, customer_with_card(stripe_sdk, GOOD_CARD))

    answer = through.charge(held(paid.invoice_id))

    assert answer.outcome == "already_handled"
    entry = through.ledger(paid.invoice_id)
    assert (entry.state, entry.calls) == (HostedChargeState.PAID_ELSEWHERE, 0)
    assert proxy.forwarded(PAY) == 0
    assert proxy.forwarded(r"/v1/invoices/\w+", "GET") == 1
    assert succeeded_charges(stripe_sdk, paid.customer_id) == 1  # its own first payment


def test_a_first_pay_of_a_void_invoice_is_closed_and_pays_nothing(
    stripe_sdk: stripe.StripeClient, through: Charging, proxy: FaultProxy
) -> None:
    failed = failed_subscription(stripe_sdk)
    stripe_sdk.v1.invoices.void_invoice(failed.invoice_id)

    answer = through.charge(held(failed.invoice_id))

    assert answer.outcome == "closed"
    entry = through.ledger(failed.invoice_id)
    assert (entry.state, entry.calls) == (HostedChargeState.CLOSED, 0)
    assert proxy.forwarded(PAY) == 0


def test_a_good_card_succeeds_once_and_a_repeat_of_the_attempt_calls_nothing(
    stripe_sdk: stripe.StripeClient, through: Charging, proxy: FaultProxy
) -> None:
    invoice_id, customer = declined_with_good_card(stripe_sdk)

    first = through.charge(held(invoice_id))
    before = len(proxy.requests)
    again = through.charge(held(invoice_id))

    assert first.outcome == "succeeded" and again.outcome == "succeeded"
    assert len(proxy.requests) == before  # replayed from the ledger
    entry = through.ledger(invoice_id)
    assert (entry.state, entry.calls) == (HostedChargeState.SUCCEEDED, 1)
    assert entry.provider_charge_id is not None and entry.provider_charge_id.startswith("ch_")
    assert proxy.forwarded(PAY) == 1
    assert succeeded_charges(stripe_sdk, customer) == 1


# Declines


def test_localstripes_generic_decline_fails_without_a_code(
    stripe_sdk: stripe.StripeClient, through: Charging, proxy: FaultProxy
) -> None:
    failed = failed_subscription(stripe_sdk)

    answer = through.charge(held(failed.invoice_id))

    assert (answer.outcome, answer.decline_code) == ("failed", None)
    entry = through.ledger(failed.invoice_id)
    assert (entry.state, entry.decline_code, entry.calls) == (HostedChargeState.DECLINED, None, 1)
    assert proxy.forwarded(PAY) == 1


def card_error(**fields: Any) -> dict[str, Any]:
    return {
        "error": {
            "type": "card_error",
            "code": "card_declined",
            "message": "Your card was declined.",
            "charge": "ch_new",
            **fields,
        }
    }


@settings(max_examples=15)
@given(
    decline=st.sampled_from(
        ["insufficient_funds", "do_not_honor", "card_declined", "generic_decline", "lost_card"]
    ),
    advice=st.sampled_from([None, "try_again_later", "do_not_try_again"]),
)
def test_a_402_decline_fails_with_its_codes_the_generic_one_without(
    decline: str, advice: str | None
) -> None:
    """Each example on a ledger of its own (a SQLite store made here: Hypothesis reuses no
    function-scoped fixture across examples)."""
    from recoup.storage.sqlite.store import SqliteStore

    store = SqliteStore(":memory:")
    try:
        with RecordingStripe() as recording:
            recording.on("GET", "/v1/invoices/in_1", (200, stripe_invoice("in_1")))
            fields = {"decline_code": decline, "advice_code": advice}
            recording.on(
                "POST",
                "/v1/invoices/in_1/pay",
                (402, card_error(**{k: v for k, v in fields.items() if v is not None})),
            )
            charging = Charging(store, recording.url)
            try:
                answer = charging.charge(held("in_1"))
            finally:
                charging.accounts.close()
            pays = recording.sent("POST", "/v1/invoices/in_1/pay")
        expected = None if decline == "card_declined" else decline
        assert (answer.outcome, answer.decline_code, answer.advice_code) == (
            "failed",
            expected,
            advice,
        )
        entry = charging.ledger("in_1")
        assert (entry.state, entry.decline_code, entry.provider_charge_id) == (
            HostedChargeState.DECLINED,
            expected,
            "ch_new",
        )
        assert [p.idempotency_key for p in pays] == ["charge:in_1:1"]
    finally:
        store.close()


def test_a_card_that_needs_authentication_fails_authentication_required(
    stripe_sdk: stripe.StripeClient, through: Charging, proxy: FaultProxy
) -> None:
    failed = failed_subscription(stripe_sdk)
    replace_card(stripe_sdk, failed.customer_id, AUTHENTICATING_CARD)

    answer = through.charge(held(failed.invoice_id))

    assert (answer.outcome, answer.decline_code) == ("failed", "authentication_required")
    assert through.ledger(failed.invoice_id).state is HostedChargeState.ACTION_REQUIRED
    assert proxy.forwarded(PAY) == 1


# Pays in doubt


def test_an_answer_dropped_after_the_pay_is_pending_then_looked_up_and_never_paid_twice(
    stripe_sdk: stripe.StripeClient, through: Charging, proxy: FaultProxy
) -> None:
    invoice_id, customer = declined_with_good_card(stripe_sdk)
    proxy.inject(FaultKind.DROP_AFTER, PAY)

    lost = through.charge(held(invoice_id))
    entry = through.ledger(invoice_id)
    found = through.charge(held(invoice_id))

    assert lost.outcome == "pending"
    assert (entry.state, entry.calls) == (HostedChargeState.PENDING, 1)
    assert found.outcome == "succeeded"
    assert through.ledger(invoice_id).state is HostedChargeState.SUCCEEDED
    assert proxy.forwarded(PAY) == 1  # the look-up settled it: no second pay request
    assert succeeded_charges(stripe_sdk, customer) == 1


def test_a_pay_that_hung_before_reaching_stripe_is_pending_then_paid_once(
    stripe_sdk: stripe.StripeClient, impatient: Charging, proxy: FaultProxy
) -> None:
    invoice_id, customer = declined_with_good_card(stripe_sdk)
    proxy.inject(FaultKind.HANG_BEFORE, PAY)

    lost = impatient.charge(held(invoice_id))
    paid = impatient.charge(held(invoice_id))

    assert lost.outcome == "pending"
    assert paid.outcome == "succeeded"
    entry = impatient.ledger(invoice_id)
    assert (entry.state, entry.calls) == (HostedChargeState.SUCCEEDED, 2)
    assert proxy.forwarded(PAY) == 1
    assert succeeded_charges(stripe_sdk, customer) == 1


@pytest.mark.parametrize("status", [429, 500])
def test_a_rate_limit_or_server_error_is_pending_and_the_next_try_pays(
    stripe_sdk: stripe.StripeClient, through: Charging, proxy: FaultProxy, status: int
) -> None:
    invoice_id, customer = declined_with_good_card(stripe_sdk)
    proxy.inject(FaultKind.STATUS, PAY, status=status)

    busy = through.charge(held(invoice_id))
    entry = through.ledger(invoice_id)
    paid = through.charge(held(invoice_id))

    assert (busy.outcome, busy.decline_code) == ("pending", None)
    assert f"HTTP {status}" in (busy.detail or "")
    assert (entry.state, entry.calls) == (HostedChargeState.PENDING, 1)
    assert paid.outcome == "succeeded"
    assert proxy.forwarded(PAY) == 1
    assert succeeded_charges(stripe_sdk, customer) == 1


def test_an_attempt_that_may_not_pay_and_was_never_asked_calls_nothing(
    stripe_sdk: stripe.StripeClient, through: Charging, proxy: FaultProxy
) -> None:
    invoice_id, customer = declined_with_good_card(stripe_sdk)

    answer = through.charge(held(invoice_id, InvoiceState.CANCELLED), may_pay=False)

    assert answer.outcome == "already_handled"
    assert proxy.requests == []
    assert succeeded_charges(stripe_sdk, customer) == 0


def test_an_attempt_that_may_not_pay_looks_up_a_pay_in_doubt_and_pays_nothing(
    stripe_sdk: stripe.StripeClient, impatient: Charging, proxy: FaultProxy
) -> None:
    invoice_id, customer = declined_with_good_card(stripe_sdk)
    proxy.inject(FaultKind.HANG_BEFORE, PAY)

    lost = impatient.charge(held(invoice_id))
    answer = impatient.charge(held(invoice_id, InvoiceState.CANCELLED), may_pay=False)

    assert lost.outcome == "pending"
    assert answer.outcome == "already_handled"
    assert "never reached Stripe" in (answer.detail or "")
    assert proxy.forwarded(PAY) == 0
    assert succeeded_charges(stripe_sdk, customer) == 0
    assert stripe_sdk.v1.invoices.retrieve(invoice_id).status == "open"


def test_a_pay_in_doubt_of_an_invoice_recovered_meanwhile_is_not_counted_twice(
    stripe_sdk: stripe.StripeClient, through: Charging, proxy: FaultProxy
) -> None:
    """The pay went through while its answer was lost, and Recoup heard the invoice was paid
    (the webhook): the look-up's `paid` is that one payment, already counted."""
    invoice_id, customer = declined_with_good_card(stripe_sdk)
    proxy.inject(FaultKind.DROP_AFTER, PAY)

    lost = through.charge(held(invoice_id))
    answer = through.charge(held(invoice_id, InvoiceState.RECOVERED), may_pay=False)

    assert lost.outcome == "pending"
    assert answer.outcome == "already_handled"
    assert through.ledger(invoice_id).state is HostedChargeState.PAID_ELSEWHERE
    assert proxy.forwarded(PAY) == 1
    assert succeeded_charges(stripe_sdk, customer) == 1


# Refusals


def test_a_refused_pay_is_errored_not_a_decline_and_the_row_stays_pending(
    recording: RecordingStripe, recorded: Charging
) -> None:
    refusal = {
        "error": {
            "type": "invalid_request_error",
            "message": "This customer has no attached payment source or default payment method.",
        }
    }
    recording.on("GET", "/v1/invoices/in_1", (200, stripe_invoice("in_1")))
    recording.on("POST", "/v1/invoices/in_1/pay", (400, refusal))

    answer = recorded.charge(held("in_1"))

    assert (answer.outcome, answer.decline_code) == ("errored", None)
    assert "no attached payment source" in (answer.detail or "")
    entry = recorded.ledger("in_1")
    assert (entry.state, entry.calls) == (HostedChargeState.PENDING, 1)
    assert len(recording.sent("POST", "/v1/invoices/in_1/pay")) == 1
    assert recording.sent("POST", "/v1/invoices/in_1/pay")[0].authorization == f"Bearer {TEST_KEY}"


@pytest.mark.parametrize("state", [InvoiceState.CANCELLED, InvoiceState.EXHAUSTED])
def test_a_pay_in_doubt_that_went_through_after_a_stop_is_a_success_to_be_heard(
    stripe_sdk: stripe.StripeClient, through: Charging, proxy: FaultProxy, state: InvoiceState
) -> None:
    """Recoup heard of no payment (the invoice was stopped or exhausted while the pay was in
    doubt): the paid invoice is this attempt's pay, which must be heard (the lifecycle raises
    `invoice.charged_after_stop`), not swallowed as handled elsewhere."""
    invoice_id, customer = declined_with_good_card(stripe_sdk)
    proxy.inject(FaultKind.DROP_AFTER, PAY)

    lost = through.charge(held(invoice_id))
    answer = through.charge(held(invoice_id, state), may_pay=False)

    assert lost.outcome == "pending"
    assert answer.outcome == "succeeded"
    assert through.ledger(invoice_id).state is HostedChargeState.SUCCEEDED
    assert proxy.forwarded(PAY) == 1
    assert succeeded_charges(stripe_sdk, customer) == 1
