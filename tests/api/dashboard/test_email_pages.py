"""The dashboard's invoice page lists the invoice's emails to its customer (from the email
ledger): kind, when in the customer's time, state, recipient, Message-ID and run log."""

from __future__ import annotations

import os

from recoup.api.dashboard.rendering import local
from recoup.recovery.email_settings import EmailSettings
from recoup.recovery.records import KEEP
from recoup.sealed import SecretBox
from tests.api.dashboard.desk import Desk, page_text


def test_an_invoices_page_shows_its_planned_emails(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    settings = EmailSettings(
        desk.store.messages, SecretBox([os.environ["RECOUP_SECRET_KEY"]]), now=desk.clock.now
    )
    settings.save(
        settings.settled(
            "acme",
            smtp_url="smtp://127.0.0.1:2525?starttls=never",
            email_from="Acme Billing <billing@acme.example>",
            reply_to=KEEP,
            update_card_url=KEEP,
            templates_dir=KEEP,
            allow_unsubscribe=KEEP,
        )
    )
    desk.invoice("acme", "inv_1")
    desk.invoice("acme", "inv_quiet")
    (email,) = desk.store.messages.invoice_emails("acme", "inv_1")

    answer = browser.get("/invoices/inv_1")
    emails = answer.text.split('data-testid="emails"')[1].split("</table>")[0]
    assert emails.count("<tr>") == 2  # the header and the payment_failed email
    assert "payment_failed" in emails and f'href="/jobs/{email.job_id}"' in emails
    assert "planned" in emails
    assert local(email.send_at, "America/Chicago") in page_text(answer)


def test_an_invoice_of_a_tenant_without_smtp_says_no_email_goes_out(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.invoice("acme", "inv_1")
    text = page_text(browser.get("/invoices/inv_1"))
    assert "No email to the customer" in text
