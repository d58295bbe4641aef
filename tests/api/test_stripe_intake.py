"""POST /v1/intake/stripe/{tenant} over real HTTP, on both backends: Stripe events built with
the `stripe` SDK's objects and signed as Stripe signs them, verified by the SDK in the route,
and turned into dunning (failures, payments, card updates), each once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from recoup.client import Client, Unprocessable
from recoup.dunning.planner import Failure, plan_retries
from recoup.dunning.policy import preset
from recoup.sealed import SecretBox
from recoup.storage import Store
from recoup.tenancy import disable_tenant, enable_tenant
from tests.api.conftest import Api
from tests.recovery.stripe_payloads import (
    BASIL,
    CREATED,
    customer,
    event,
    invoice,
    payload,
    payment_intent,
    signed,
)

SECRET = "whsec_" + "t3stS3cr3t" * 3
CHARGE_URL = "http://127.0.0.1:9/charge"
INVOICE = "in_1PqRsT2eZvKYlo2C"
FAILED = "invoice.payment_failed"


@dataclass
class Intake:
    """A tenant with a Stripe endpoint secret and a charge URL, and the two sides of it: the
    tenant's API client and Stripe's (no token)."""

    tenant: str
    http: httpx.Client
    stripe: httpx.Client
    store: Store

    def send(
        self, body: dict[str, Any], *, secret: str = SECRET, at: int | None = None
    ) -> httpx.Response:
        text = payload(body)
        return self.stripe.post(
            f"/v1/intake/stripe/{self.tenant}",
            content=text.encode(),
            headers=signed(text, secret, at=at),
        )

    def invoice(self, invoice_id: str = INVOICE) -> dict[str, Any]:
        found = self.http.get(f"/v1/dunning/invoices/{invoice_id}")
        assert found.status_code == 200, found.text
        body: dict[str, Any] = found.json()
        return body

    def jobs(self, invoice_id: str = INVOICE) -> list[dict[str, Any]]:
        """The invoice's attempt jobs (its group also holds the deadline of a wait)."""
        jobs: list[dict[str, Any]] = self.http.get(
            "/v1/jobs", params={"group": f"dunning:{invoice_id}"}
        ).json()["jobs"]
        attempts = [j for j in jobs if (j["name"] or "").startswith("dunning-retry-")]
        return sorted(attempts, key=lambda j: j["name"])


@pytest.fixture
def intake(api: Api) -> Intake:
    return make_intake(api)


def make_intake(api: Api) -> Intake:
    """A tenant of `api` with the Stripe secret, a charge URL and New York as its default."""
    caller = api.tenant()
    http = api.http(caller)
    put = http.put(
        "/v1/dunning/settings",
        json={
            "charge_url": CHARGE_URL,
            "stripe_webhook_secret": SECRET,
            "default_timezone": "America/New_York",
        },
    )
    assert put.status_code == 200, put.text
    return Intake(caller.tenant, http, api.http(), api.store)


def failed(**invoice_fields: Any) -> dict[str, Any]:
    return event(FAILED, invoice(intent=payment_intent(), **invoice_fields))


def test_a_payment_failure_opens_dunning_with_its_decline_code_and_the_policys_plan(
    intake: Intake,
) -> None:
    answer = intake.send(failed())
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["outcome"] == "dunning_opened" and body["replayed"] is False
    assert body["invoices"] == [{"invoice_id": INVOICE, "state": "retrying"}]
    timeline = intake.invoice()
    assert timeline["decline_code"] == "insufficient_funds"
    assert timeline["customer_id"] == "cus_QxYz123" and timeline["amount"] == 1999
    stored = intake.store.get_invoice(intake.tenant, INVOICE)
    assert stored is not None
    assert (stored.timezone, stored.country, stored.gateway) == ("America/Chicago", "US", "stripe")
    assert (stored.card_fingerprint, stored.card_network) == ("fp_Q1w2E3r4", "visa")
    # The schedule is the tenant's policy's plan of this very failure.
    expected = plan_retries(
        Failure(
            invoice=INVOICE,
            failed_at=datetime.fromtimestamp(CREATED, UTC),
            timezone="America/Chicago",
            country="US",
            decline_code="insufficient_funds",
            card="fp_Q1w2E3r4",
            network="visa",
            gateway="stripe",
            amount=1999,
        ),
        preset("business-days"),
    )
    planned = [datetime.fromisoformat(a["at"]) for a in timeline["attempts"]]
    assert planned == [a.at for a in expected.attempts]  # type: ignore[union-attr]
    assert [j["state"] for j in intake.jobs()] == ["scheduled"] * len(planned)


@pytest.mark.parametrize(
    ("intent", "state", "decision"),
    [
        (payment_intent(decline_code="stolen_card"), "exhausted", "no_retry"),
        (
            payment_intent(decline_code="expired_card", code="expired_card"),
            "awaiting_customer",
            "await_customer",
        ),
        # The advice code only ever makes a decision stricter.
        (payment_intent(advice_code="do_not_try_again"), "exhausted", "no_retry"),
    ],
)
def test_the_decline_and_advice_codes_decide_as_the_taxonomy_says(
    intake: Intake, intent: dict[str, Any], state: str, decision: str
) -> None:
    body = event(FAILED, invoice(intent=intent, basil=True), api_version=BASIL)
    assert intake.send(body).json()["outcome"] == "dunning_opened"
    timeline = intake.invoice()
    assert (timeline["state"], timeline["decision"]) == (state, decision)
    assert intake.jobs() == []


def test_a_replayed_event_changes_nothing_and_answers_the_first_outcome(intake: Intake) -> None:
    first = intake.send(failed()).json()
    before, jobs = intake.invoice(), intake.jobs()
    again = intake.send(failed())  # Stripe's retry: same event, a new signature
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == {**first, "replayed": True}
    assert intake.invoice() == before and intake.jobs() == jobs


def test_invoice_paid_recovers_the_invoice_and_cancels_its_retries(intake: Intake) -> None:
    intake.send(failed())
    paid = event("invoice.paid", invoice(status="paid"), event_id="evt_paid", created=CREATED + 60)
    answer = intake.send(paid).json()
    assert answer["outcome"] == "recovered"
    assert answer["invoices"] == [{"invoice_id": INVOICE, "state": "recovered"}]
    timeline = intake.invoice()
    assert timeline["recovered_by"] == "paid_out_of_band"
    assert {j["state"] for j in intake.jobs()} == {"cancelled"}
    # invoice.payment_succeeded of the same payment follows: nothing more happens.
    succeeded = event(
        "invoice.payment_succeeded", invoice(status="paid"), event_id="evt_ok", created=CREATED + 60
    )
    assert intake.send(succeeded).json()["outcome"] == "already_recovered"
    assert intake.invoice() == timeline


def test_a_card_update_replans_an_invoice_awaiting_its_customer_once(intake: Intake) -> None:
    intent = payment_intent(decline_code="expired_card", code="expired_card")
    intake.send(event(FAILED, invoice(intent=intent)))
    assert intake.invoice()["state"] == "awaiting_customer" and intake.jobs() == []
    update = event(
        "payment_method.automatically_updated",
        {"id": "pm_1", "object": "payment_method", "customer": "cus_QxYz123", "card": {}},
        event_id="evt_card",
        created=CREATED + 3600,
    )
    answer = intake.send(update).json()
    assert answer["outcome"] == "payment_method_updated"
    assert answer["invoices"] == [{"invoice_id": INVOICE, "state": "retrying"}]
    jobs = intake.jobs()
    assert [j["state"] for j in jobs] == ["scheduled"]
    # The same update delivered again plans no second prompt retry.
    assert intake.send(update).json()["replayed"] is True
    assert intake.jobs() == jobs


def test_a_customers_new_default_method_updates_only_that_customers_invoices(
    intake: Intake,
) -> None:
    expired = payment_intent(decline_code="expired_card", code="expired_card")
    intake.send(event(FAILED, invoice(intent=expired)))
    other = invoice("in_other", customer="cus_Other", intent=expired)
    intake.send(event(FAILED, other, event_id="evt_other"))
    unrelated = event(
        "customer.updated",
        customer(),
        event_id="evt_email",
        previous={"email": "old@example.com"},
    )
    assert intake.send(unrelated).json()["outcome"] == "ignored"
    changed = event(
        "customer.updated",
        customer(),
        event_id="evt_pm",
        previous={"invoice_settings": {"default_payment_method": "pm_old"}},
    )
    assert intake.send(changed).json()["outcome"] == "payment_method_updated"
    assert intake.invoice()["state"] == "retrying"
    assert intake.invoice("in_other")["state"] == "awaiting_customer"


def test_events_of_recoups_own_attempts_are_their_outcomes(intake: Intake) -> None:
    intake.send(failed())
    declined = event(
        FAILED,
        invoice(intent=payment_intent(decline_code="stolen_card")),
        event_id="evt_a1",
        idempotency_key=f"charge:{INVOICE}:1",
        created=CREATED + 86_400,
    )
    assert intake.send(declined).json()["outcome"] == "attempt_failed"
    timeline = intake.invoice()
    assert timeline["state"] == "exhausted"
    assert timeline["attempts"][0]["state"] == "failed"
    assert timeline["attempts"][0]["decline_code"] == "stolen_card"


def test_a_payment_by_recoups_attempt_recovers_by_that_attempt(intake: Intake) -> None:
    intake.send(failed())
    paid = event(
        "invoice.paid",
        invoice(status="paid"),
        event_id="evt_a2",
        idempotency_key=f"charge:{INVOICE}:2",
        created=CREATED + 86_400,
    )
    assert intake.send(paid).json()["outcome"] == "attempt_succeeded"
    timeline = intake.invoice()
    assert timeline["recovered_by"] == "attempt:2"
    assert [a["state"] for a in timeline["attempts"]] == [
        "cancelled",
        "succeeded",
        "cancelled",
        "cancelled",
    ]
    assert not any(e["type"] == "invoice.double_charged" for e in timeline["events"])


def test_a_later_failure_of_an_invoice_in_dunning_leaves_its_retries(intake: Intake) -> None:
    intake.send(failed())
    before = intake.invoice()
    later = event(FAILED, invoice(intent=payment_intent()), event_id="evt_2", created=CREATED + 9)
    answer = intake.send(later).json()
    assert answer["outcome"] == "already_in_dunning"
    assert intake.invoice() == before


def test_a_failure_arriving_after_the_invoices_payment_is_stale(intake: Intake) -> None:
    paid = event("invoice.paid", invoice(status="paid"), event_id="evt_paid", created=CREATED + 5)
    assert intake.send(paid).json()["outcome"] == "not_in_dunning"
    answer = intake.send(failed()).json()
    assert answer["outcome"] == "ignored" and "paid after" in answer["detail"]
    assert intake.http.get(f"/v1/dunning/invoices/{INVOICE}").status_code == 404


def test_a_bad_signature_is_a_400_problem_and_changes_nothing(intake: Intake) -> None:
    wrong = intake.send(failed(), secret="whsec_" + "n0tTh3S3cr3t" * 3)
    assert wrong.status_code == 400
    assert wrong.headers["content-type"].startswith("application/problem+json")
    assert wrong.json()["type"].endswith("invalid-signature")
    text = payload(failed())
    tampered = intake.stripe.post(
        f"/v1/intake/stripe/{intake.tenant}",
        content=text.replace("1999", "1").encode(),
        headers=signed(text, SECRET),
    )
    assert tampered.status_code == 400
    unsigned = intake.stripe.post(f"/v1/intake/stripe/{intake.tenant}", content=text.encode())
    assert unsigned.status_code == 400 and "Stripe-Signature" in unsigned.json()["detail"]
    assert intake.http.get(f"/v1/dunning/invoices/{INVOICE}").status_code == 404
    # Nothing was recorded either: the genuine delivery acts.
    assert intake.send(failed()).json()["outcome"] == "dunning_opened"


def test_a_signature_older_than_the_tolerance_is_refused(intake: Intake) -> None:
    stale = intake.send(failed(), at=int(time.time()) - 301)
    assert stale.status_code == 400 and "tolerance" in stale.json()["detail"]
    assert intake.send(failed(), at=int(time.time()) - 240).status_code == 200


def test_an_unknown_event_type_answers_200_ignored_and_is_not_recorded(intake: Intake) -> None:
    answer = intake.send(event("charge.refunded", {"id": "ch_1", "object": "charge"}))
    assert answer.status_code == 200
    assert answer.json()["outcome"] == "ignored" and answer.json()["replayed"] is False
    assert intake.send(event("charge.refunded", {"id": "ch_1"})).json()["replayed"] is False


def test_no_intake_without_a_secret_and_for_no_tenant_look_the_same(
    api: Api, intake: Intake
) -> None:
    bare = api.tenant()
    text = payload(failed())
    answers = [
        intake.stripe.post(
            f"/v1/intake/stripe/{name}", content=text.encode(), headers=signed(text, SECRET)
        )
        for name in (bare.tenant, "no-such-tenant", "Not A Tenant")
    ]
    assert [a.status_code for a in answers] == [404, 404, 404]
    assert len({a.text for a in answers}) == 1


def test_a_disabled_tenants_events_are_refused_until_it_is_enabled(intake: Intake) -> None:
    disable_tenant(intake.store, intake.tenant, now=datetime.now(UTC))
    refused = intake.send(failed())
    assert refused.status_code == 403 and refused.json()["type"].endswith("tenant-disabled")
    forged = intake.send(failed(), secret="whsec_" + "n0tTh3S3cr3t" * 3)
    assert forged.status_code == 400  # the signature first: the unsigned learn nothing
    assert intake.store.get_invoice(intake.tenant, INVOICE) is None
    enable_tenant(intake.store, intake.tenant, now=datetime.now(UTC))
    # Stripe's next delivery of the same event is taken whole.
    assert intake.send(failed()).json()["outcome"] == "dunning_opened"


def test_the_secret_is_write_only_kept_when_left_out_and_removed_by_null(intake: Intake) -> None:
    shown = intake.http.get("/v1/dunning/settings")
    assert shown.json()["stripe_webhook_secret_set"] is True
    assert SECRET not in shown.text
    assert shown.json()["default_timezone"] == "America/New_York"
    kept = intake.http.put("/v1/dunning/settings", json={"charge_url": CHARGE_URL})
    assert kept.json()["stripe_webhook_secret_set"] is True and SECRET not in kept.text
    assert kept.json()["default_timezone"] == "UTC"  # a PUT replaces what it does not keep
    assert intake.send(failed()).status_code == 200
    bad = intake.http.put("/v1/dunning/settings", json={"stripe_webhook_secret": SECRET + " x"})
    assert bad.status_code == 422 and "stripe_webhook_secret" in bad.text
    assert SECRET not in bad.text
    removed = intake.http.put(
        "/v1/dunning/settings", json={"charge_url": CHARGE_URL, "stripe_webhook_secret": None}
    )
    assert removed.json()["stripe_webhook_secret_set"] is False
    assert (
        intake.send(
            failed(),
        ).status_code
        == 404
    )


def test_the_python_client_sets_the_secret_and_keeps_it_when_not_given(api: Api) -> None:
    caller = api.tenant()
    with Client(api.url, caller.token) as client:
        first = client.configure_dunning(
            charge_url=CHARGE_URL, stripe_webhook_secret=SECRET, default_timezone="Asia/Tokyo"
        )
        assert first.stripe_webhook_secret_set and first.default_timezone == "Asia/Tokyo"
        again = client.configure_dunning(charge_url=CHARGE_URL)
        assert again.stripe_webhook_secret_set and again.default_timezone == "UTC"
        with pytest.raises(Unprocessable) as caught:
            client.configure_dunning(stripe_webhook_secret="sk_" + SECRET)
        assert "stripe_webhook_secret" in str(caught.value) and SECRET not in str(caught.value)
    stored = api.store.get_intake_settings(caller.tenant)
    assert stored is not None and stored_secret(stored.stripe_webhook_secret) == SECRET


def test_a_tenant_without_a_charge_url_gets_the_failure_on_stripes_retry(intake: Intake) -> None:
    intake.http.put("/v1/dunning/settings", json={"stripe_webhook_secret": SECRET})
    refused = intake.send(failed())
    assert refused.status_code == 422 and "charge_url" in refused.text
    intake.http.put("/v1/dunning/settings", json={"charge_url": CHARGE_URL})
    retried = intake.send(failed())
    assert retried.json()["outcome"] == "dunning_opened" and retried.json()["replayed"] is False


def test_concurrent_deliveries_of_one_event_act_once(intake: Intake) -> None:
    answers: list[httpx.Response] = []
    start = threading.Barrier(6)

    def deliver() -> None:
        start.wait()
        answers.append(intake.send(failed()))

    threads = [threading.Thread(target=deliver) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    firsts = [a for a in answers if a.status_code == 200 and not a.json()["replayed"]]
    assert len(firsts) == 1 and firsts[0].json()["outcome"] == "dunning_opened"
    assert all(a.status_code in (200, 409) for a in answers)
    assert all("Retry-After" in a.headers for a in answers if a.status_code == 409)
    assert len(intake.jobs()) == 4


def test_without_the_stripe_package_the_api_runs_and_the_intake_says_which_extra(
    tmp_path: Path,
) -> None:
    code = f"""
import importlib.abc, sys
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "stripe":
            raise ModuleNotFoundError("No module named 'stripe'", name=name)
        return None
sys.meta_path.insert(0, Missing())
from datetime import UTC, datetime
from fastapi.testclient import TestClient
from recoup.api.app import create_app
from recoup.recovery.intake_store import IntakeSettings
from recoup.storage import open_store
from recoup.timekeeping.clock import SystemClock
store = open_store("sqlite:///core.db")
store.put_intake_settings(IntakeSettings(tenant="acme", stripe_webhook_secret={SECRET!r},
                          default_timezone="UTC", updated_at=datetime.now(UTC)))
client = TestClient(create_app(store, clock=SystemClock()))
answer = client.post("/v1/intake/stripe/acme", content=b"{{}}",
                     headers={{"Stripe-Signature": "t=1,v1=00"}})
print(answer.status_code, answer.json()["detail"], "stripe" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    status, *rest = done.stdout.split()
    assert status == "503" and "recoup[stripe]" in done.stdout and rest[-1] == "False"


def stored_secret(stored: str | None) -> str | None:
    """The secret as stored: sealed (never the secret itself), opening to it."""
    assert stored is not None and stored.startswith("sealed:v1:") and SECRET not in stored
    return SecretBox([os.environ["RECOUP_SECRET_KEY"]]).open(stored)
