"""Stripe-native dunning end to end (issue 18), on both backends: Recoup on a test clock pays
the invoices itself through localstripe, a stateful Stripe emulator, with a fault proxy
between them, and hears Stripe's webhooks at its intake.

The tenant is set up as a user would (PUT /v1/dunning/settings: `charge_with` stripe, the
Stripe key, the endpoint secret, a policy whose final action is `cancel`). Each customer has
its own subscription at localstripe, whose first invoice is open after a decline. Charges are
counted on localstripe's side, and Recoup's Stripe calls through the proxy.

localstripe sends no `invoice.payment_failed` for a failed subscription invoice, so the test
builds that event around the invoice localstripe returns and signs it with the endpoint
secret; its `customer.updated` carries no `previous_attributes`, so a card change is reported
through Recoup's API. The webhooks localstripe does send (~1 s late) are caught by a sink and
delivered to the intake byte for byte, with localstripe's own signature.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from recoup.api.app import ApiSettings, create_app
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.time_travel import TestClock
from recoup.recovery.hosted_charging import StripeAccounts
from recoup.recovery.runtime import dunning_runtime
from recoup.sealed import SecretBox
from recoup.storage import open_api_tables
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import VirtualClock
from tests.support import DEADLINE, ServerThread, wait_until
from tests.support_stripe import (
    GOOD_CARD,
    Delivery,
    FaultKind,
    FaultProxy,
    LocalStripe,
    Subscribed,
    WebhookSink,
    failed_subscription,
    register_webhook,
    replace_card,
    signed_event,
    succeeded_charges,
)

pytestmark = pytest.mark.slow

API_KEY = "sk_test_RecoupEndToEnd0123456789"  # localstripe takes any sk_ key
SECRET = "whsec_" + "e2eS3cr3t" * 3
ENDPOINT = "recoup-e2e"  # the webhook endpoint at localstripe, re-pointed by each test
STRIPE_TIMEOUT = 3.0  # seconds Recoup waits on Stripe: a hanging pay times out after it
ATTEMPTS = 3
POLICY = f"""
name = "daily-then-cancel"
description = "{ATTEMPTS} daily attempts at 10:00, then the subscription is cancelled"
final_action = "cancel"
gaps = [{", ".join(["{ days = 1 }"] * ATTEMPTS)}]

[window]
start = "10:00"
jitter_minutes = 0

[calendar]
weekend = []
weekend_from_country = false

[limits]
max_duration_days = 10
stop_before_renewal = false
"""


def pay_path(invoice_id: str) -> str:
    return rf"/v1/invoices/{re.escape(invoice_id)}/pay"


@pytest.fixture(scope="module")
def localstripe() -> Iterator[LocalStripe]:
    """localstripe for this module; missing, the tests skip, or fail under CI=true."""
    if importlib.util.find_spec("localstripe") is None:
        reason = "localstripe is not installed (pip install -e '.[dev]')"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with LocalStripe() as server:
        yield server


@dataclass
class World:
    """Recoup (a runtime on a virtual clock and its API on loopback) in front of localstripe,
    through `proxy`; `sink` catches localstripe's webhooks."""

    localstripe: LocalStripe
    proxy: FaultProxy
    sink: WebhookSink
    test_clock: TestClock
    http: httpx.Client  # the tenant's API client
    tenant: str

    @property
    def stripe(self) -> Any:
        return self.localstripe.client

    def failing_customer(self) -> Subscribed:
        """A customer with the declining card, subscribed: its first invoice open."""
        return failed_subscription(self.stripe)

    def deliver(self, payload: bytes, signature: str) -> dict[str, Any]:
        """POST an event to the tenant's Stripe intake, as Stripe would."""
        answer = self.http.post(
            f"/v1/intake/stripe/{self.tenant}",
            content=payload,
            headers={"Content-Type": "application/json", "Stripe-Signature": signature},
        )
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    def report_failure(self, subscribed: Subscribed) -> dict[str, Any]:
        """The `invoice.payment_failed` localstripe does not send, built around the invoice it
        returns and signed with the endpoint secret; dunning opens."""
        invoice = self.stripe.v1.invoices.retrieve(subscribed.invoice_id).to_dict()
        assert invoice["status"] == "open"
        payload, headers = signed_event("invoice.payment_failed", invoice, SECRET)
        answer = self.deliver(payload, headers["Stripe-Signature"])
        assert answer["outcome"] == "dunning_opened", answer
        timeline = self.timeline(subscribed.invoice_id)
        assert timeline["charge_url"] == "stripe:" and timeline["final_action"] == "cancel"
        assert [a["state"] for a in timeline["attempts"]] == ["scheduled"] * ATTEMPTS
        return timeline

    def forward(self, event_type: str, object_id: str, *, after: int = 0) -> dict[str, Any]:
        """localstripe's own webhook of `event_type` about `object_id`, the first one after
        the sink's first `after` deliveries (waited for with a deadline), delivered to the
        intake unchanged."""

        def found() -> Delivery | None:
            for delivery in self.sink.deliveries[after:]:
                event = delivery.event
                if event["type"] == event_type and event["data"]["object"]["id"] == object_id:
                    return delivery
            return None

        wait_until(lambda: found() is not None, DEADLINE, interval=0.05)
        delivery = found()
        assert delivery is not None, f"localstripe sent no {event_type} of {object_id}"
        assert delivery.signature is not None
        return self.deliver(delivery.payload, delivery.signature)

    def timeline(self, invoice_id: str) -> dict[str, Any]:
        found = self.http.get(f"/v1/dunning/invoices/{invoice_id}")
        assert found.status_code == 200, found.text
        body: dict[str, Any] = found.json()
        return body

    def attempt_at(self, invoice_id: str, n: int) -> datetime:
        attempt = self.timeline(invoice_id)["attempts"][n - 1]
        assert attempt["attempt"] == n
        return datetime.fromisoformat(attempt["at"])

    def run_until(self, at: datetime) -> list[tuple[str, str]]:
        """Advance the test clock to `at`, running what is due; Recoup's Stripe calls meanwhile
        (method, path)."""
        seen = len(self.proxy.requests)
        self.test_clock.advance_to(at)
        return [(r.method, _ids.sub(r"\1_*", r.path)) for r in self.proxy.requests[seen:]]

    def run_attempt(self, invoice_id: str, n: int) -> list[tuple[str, str]]:
        return self.run_until(self.attempt_at(invoice_id, n))

    def next_attempt(self, invoice_id: str) -> int:
        """The first attempt still scheduled."""
        attempts = self.timeline(invoice_id)["attempts"]
        return next(a["attempt"] for a in attempts if a["state"] == "scheduled")

    def last_attempt_at(self, invoice_id: str) -> datetime:
        return max(datetime.fromisoformat(a["at"]) for a in self.timeline(invoice_id)["attempts"])

    def pays(self, invoice_id: str) -> int:
        """Pay requests of the invoice that reached localstripe."""
        return self.proxy.forwarded(pay_path(invoice_id))

    def charges(self, subscribed: Subscribed) -> int:
        """The customer's succeeded charges, as localstripe counts them."""
        return succeeded_charges(self.stripe, subscribed.customer_id)


_ids = re.compile(r"\b(pi|ch|pm)_\w+")  # the ids of payments, charges, cards: `pi_*`


def an_attempt(invoice_id: str) -> list[tuple[str, str]]:
    """The Stripe calls of one attempt: the invoice read (its latest payment intent with it:
    localstripe's invoice names it by id), then the pay (and the pay's payment intent)."""
    return [
        ("GET", f"/v1/invoices/{invoice_id}"),
        ("GET", "/v1/payment_intents/pi_*"),
        ("POST", f"/v1/invoices/{invoice_id}/pay"),
        ("GET", "/v1/payment_intents/pi_*"),
    ]


@pytest.fixture
def world(localstripe: LocalStripe, store: Any) -> Iterator[World]:
    clock = VirtualClock(datetime.fromtimestamp(int(time.time()), UTC))  # localstripe's now
    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    box = SecretBox([os.environ["RECOUP_SECRET_KEY"]])
    with FaultProxy(localstripe.url) as proxy, WebhookSink() as sink:
        accounts = StripeAccounts(box, api_base=proxy.url, timeout=STRIPE_TIMEOUT)
        dunning, handlers = dunning_runtime(scheduler, store, stripe=accounts)
        worker = scheduler.worker(handlers=handlers, concurrency=8)
        test_clock = TestClock(clock, worker, store, schedules=store, before_step=dunning.resync)
        app = create_app(
            store,
            clock=clock,
            settings=ApiSettings(ssrf=SsrfGuard(allow_private=True), prune_every=None),
            scheduler=scheduler,
            dunning=dunning,
            secret_box=box,
            stripe_accounts=accounts,
        )
        tenant = f"shop-{store.backend}"
        now = clock.now()
        store.ensure_tenant(new_tenant(tenant, now=now))
        token = issue_token(open_api_tables(store), tenant, now=now).secret
        register_webhook(localstripe.url, ENDPOINT, sink.url, SECRET)
        with (
            ServerThread(app) as served,
            httpx.Client(
                base_url=served.url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0
            ) as http,
        ):
            settings = http.put(
                "/v1/dunning/settings",
                json={
                    "policy": POLICY,
                    "charge_with": "stripe",
                    "stripe_api_key": API_KEY,
                    "stripe_webhook_secret": SECRET,
                },
            )
            assert settings.status_code == 200, settings.text
            assert settings.json()["charge_with"] == "stripe"
            yield World(localstripe, proxy, sink, test_clock, http, tenant)
        accounts.close()


def test_a_replaced_card_recovers_at_the_next_attempt_and_stripes_webhook_changes_nothing(
    world: World,
) -> None:
    customer = world.failing_customer()
    invoice = customer.invoice_id
    world.report_failure(customer)

    calls = world.run_attempt(invoice, 1)

    assert calls == an_attempt(invoice)
    assert world.timeline(invoice)["attempts"][0]["state"] == "failed"
    assert world.charges(customer) == 0
    # The customer replaces the card; localstripe's customer.updated says nothing of what
    # changed (no previous_attributes): the intake cannot tell a card change from it ...
    seen = len(world.sink.deliveries)
    replace_card(world.stripe, customer.customer_id, GOOD_CARD)
    answer = world.forward("customer.updated", customer.customer_id, after=seen)
    assert answer["outcome"] == "ignored", answer
    assert world.timeline(invoice)["attempts"][1]["state"] == "scheduled"
    # ... so the billing app tells Recoup through its API.
    told = world.http.post(f"/v1/dunning/invoices/{invoice}/payment-method-updated")
    assert told.status_code == 200, told.text

    replanned = world.next_attempt(invoice)  # the re-plan from now, after attempt 1
    assert replanned > ATTEMPTS

    calls = world.run_attempt(invoice, replanned)

    assert calls == an_attempt(invoice)
    timeline = world.timeline(invoice)
    assert timeline["state"] == "recovered"
    assert timeline["recovered_by"] == f"attempt:{replanned}"
    assert world.stripe.v1.invoices.retrieve(invoice).status == "paid"
    assert world.charges(customer) == 1
    assert world.pays(invoice) == 2
    # localstripe's own invoice.payment_succeeded of that payment reaches the intake.
    answer = world.forward("invoice.payment_succeeded", invoice)
    assert answer["outcome"] in ("already_recovered", "attempt_succeeded"), answer
    assert world.timeline(invoice) == timeline
    # Past every planned attempt: nothing more is asked of Stripe.
    assert world.run_until(world.last_attempt_at(invoice) + timedelta(days=1)) == []
    assert world.charges(customer) == 1


def test_a_card_that_keeps_declining_is_exhausted_and_its_subscription_cancelled(
    world: World,
) -> None:
    customer = world.failing_customer()
    invoice = customer.invoice_id
    world.report_failure(customer)

    for n in range(1, ATTEMPTS + 1):
        calls = world.run_attempt(invoice, n)
        if n < ATTEMPTS:
            assert calls == an_attempt(invoice), n
    # The last attempt's calls, then the final action: the subscription read through the
    # invoice, then cancelled (read first, then DELETE).
    subscription = customer.subscription_id
    assert calls[:4] == an_attempt(invoice)
    assert calls[4:] == [
        ("GET", f"/v1/invoices/{invoice}"),
        ("GET", f"/v1/subscriptions/{subscription}"),
        ("DELETE", f"/v1/subscriptions/{subscription}"),
    ]
    timeline = world.timeline(invoice)
    assert timeline["state"] == "exhausted"
    assert [a["state"] for a in timeline["attempts"]] == ["failed"] * ATTEMPTS
    assert world.stripe.v1.subscriptions.retrieve(subscription).status == "canceled"
    assert world.pays(invoice) == ATTEMPTS
    assert world.charges(customer) == 0
    # localstripe's customer.subscription.deleted of Recoup's own cancel changes nothing.
    answer = world.forward("customer.subscription.deleted", subscription)
    assert answer["outcome"] == "not_in_dunning", answer
    assert world.timeline(invoice) == timeline
    assert world.run_until(world.test_clock.now() + timedelta(days=7)) == []


def test_a_subscription_deleted_mid_dunning_is_never_charged_again(world: World) -> None:
    customer = world.failing_customer()
    invoice = customer.invoice_id
    world.report_failure(customer)
    assert world.run_attempt(invoice, 1) == an_attempt(invoice)

    world.stripe.v1.subscriptions.cancel(customer.subscription_id)
    answer = world.forward("customer.subscription.deleted", customer.subscription_id)

    assert answer["outcome"] == "dunning_cancelled", answer
    assert answer["invoices"] == [{"invoice_id": invoice, "state": "cancelled"}]
    timeline = world.timeline(invoice)
    assert [a["state"] for a in timeline["attempts"]] == ["failed", "cancelled", "cancelled"]
    # A good card, and the billing app reports it: still nothing is charged.
    replace_card(world.stripe, customer.customer_id, GOOD_CARD)
    told = world.http.post(f"/v1/dunning/invoices/{invoice}/payment-method-updated")
    assert told.status_code == 200, told.text
    assert told.json()["state"] == "cancelled"
    calls = world.run_until(world.attempt_at(invoice, ATTEMPTS) + timedelta(days=3))
    assert calls == []
    assert world.timeline(invoice)["state"] == "cancelled"
    assert world.pays(invoice) == 1
    assert world.charges(customer) == 0


def test_a_pay_that_times_out_is_reconciled_by_a_look_up_not_paid_again(world: World) -> None:
    customer = world.failing_customer()
    invoice = customer.invoice_id
    world.report_failure(customer)
    replace_card(world.stripe, customer.customer_id, GOOD_CARD)
    # The pay reaches localstripe, which charges; its answer never comes back.
    world.proxy.inject(FaultKind.HANG_AFTER, pay_path(invoice))

    calls = world.run_attempt(invoice, 1)

    assert calls == an_attempt(invoice)[:3]  # the pay's answer is lost, and nothing read after
    assert world.timeline(invoice)["attempts"][0]["state"] == "pending"
    assert world.charges(customer) == 1  # paid at Stripe, unknown to Recoup

    # The attempt is asked again (the job's backoff): one look-up finds the invoice paid.
    calls = world.run_until(world.test_clock.now() + timedelta(hours=1))

    assert calls == an_attempt(invoice)[:2]  # the look-up: the invoice and its payment intent
    timeline = world.timeline(invoice)
    assert timeline["state"] == "recovered"
    assert [a["state"] for a in timeline["attempts"]] == ["succeeded", "cancelled", "cancelled"]
    assert world.pays(invoice) == 1
    assert world.charges(customer) == 1
    assert world.run_until(world.attempt_at(invoice, ATTEMPTS) + timedelta(days=1)) == []
    assert world.charges(customer) == 1


def test_a_lost_pay_whose_webhook_comes_first_is_not_paid_again(world: World) -> None:
    customer = world.failing_customer()
    invoice = customer.invoice_id
    world.report_failure(customer)
    replace_card(world.stripe, customer.customer_id, GOOD_CARD)
    # The pay reaches localstripe, which charges; the connection drops before its answer.
    world.proxy.inject(FaultKind.DROP_AFTER, pay_path(invoice))
    assert world.run_attempt(invoice, 1) == an_attempt(invoice)[:3]
    assert world.timeline(invoice)["attempts"][0]["state"] == "pending"

    # localstripe's invoice.payment_succeeded of that pay reaches the intake before the
    # attempt is asked again. Its events name no request idempotency key (Stripe's would say
    # charge:{invoice}:1, crediting the attempt): to the intake it is a payment out of band.
    answer = world.forward("invoice.payment_succeeded", invoice)
    assert answer["outcome"] == "recovered", answer

    # The attempt's retry only looks the invoice up: paid, once.
    calls = world.run_until(world.test_clock.now() + timedelta(hours=1))

    assert calls == an_attempt(invoice)[:2]
    timeline = world.timeline(invoice)
    assert timeline["state"] == "recovered"
    assert "invoice.double_charged" not in [e["type"] for e in timeline["events"]]
    assert world.pays(invoice) == 1
    assert world.charges(customer) == 1
    assert world.run_until(world.last_attempt_at(invoice) + timedelta(days=1)) == []
