"""Customers' emails in the HTTP API, on both backends: a Stripe failure's hosted invoice page
is kept as the emails' link, and the invoice's timeline lists its emails (from the ledger)
with their jobs' run logs."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api
from tests.api.test_stripe_intake import FAILED, INVOICE, failed, make_intake
from tests.recovery.stripe_payloads import event, invoice, payment_intent

PAGE = "https://invoice.stripe.com/i/acct_1M/test_YWNjdA"


def test_a_stripe_failure_plans_its_email_linked_to_the_hosted_page(api: Api) -> None:
    intake = make_intake(api)
    put = intake.http.put(
        "/v1/dunning/settings",
        json={
            "charge_url": "http://127.0.0.1:9/charge",
            "stripe_webhook_secret": "whsec_" + "0" * 32,
            "smtp_url": "smtp://127.0.0.1:2525?starttls=never",
            "email_from": "Acme Billing <billing@acme.example>",
        },
    )
    assert put.status_code == 200, put.text
    body: dict[str, Any] = invoice(intent=payment_intent())
    body["hosted_invoice_url"] = PAGE
    answer = intake.send(event(FAILED, body), secret="whsec_" + "0" * 32)
    assert answer.status_code == 200, answer.text

    assert intake.store.messages.payment_page(intake.tenant, INVOICE) == PAGE
    timeline = intake.invoice()
    (email,) = timeline["emails"]
    assert (email["kind"], email["state"], email["tries"]) == ("payment_failed", "planned", 0)
    assert email["runs_url"] == f"/v1/jobs/{email['job_id']}/runs" and email["runs"] == []
    job = intake.http.get(f"/v1/jobs/{email['job_id']}")
    assert job.status_code == 200 and job.json()["group"] == f"dunning:{INVOICE}"


def test_without_smtp_the_timeline_has_no_emails(api: Api) -> None:
    intake = make_intake(api)
    assert intake.send(failed()).status_code == 200
    assert intake.invoice()["emails"] == []
