"""The dashboard's email preview, in-process on both backends: the tenant's email of each kind
with its policy's final action, the HTML part sandboxed, a bad kind answered with a page that
names the field."""

from __future__ import annotations

import html
import re

from recoup.messages.kinds import MessageKind
from recoup.recovery.email_store import MessageSettings
from recoup.recovery.store import DunningSettings
from tests.api.dashboard.desk import START, Desk, error_of, page_text

SRCDOC = re.compile(r'<iframe[^>]*sandbox=""[^>]*srcdoc="([^"]*)"')


def test_the_preview_shows_subject_text_and_html_of_the_chosen_kind(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    answer = browser.get("/emails", params={"event": "final_warning", "locale": "fr_FR"})
    assert answer.status_code == 200
    text = page_text(answer)
    assert "Action needed: last try for your 19,99 $US payment to acme" in html.unescape(text)
    assert "vendredi 26 juin 2026" in text
    found = SRCDOC.search(answer.text)
    assert found, "the HTML part is not in a sandboxed iframe"
    email = html.unescape(found.group(1))
    assert email.startswith("<!DOCTYPE html>") and "Update your card" in email
    assert "your access will be paused" in email


def test_the_default_is_the_failure_email_and_every_kind_renders(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    assert "didn&#39;t go through" in browser.get("/emails").text
    for kind in MessageKind:
        assert browser.get("/emails", params={"event": kind.value}).status_code == 200


def test_the_final_action_is_the_tenants_policys(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.store.put_settings(
        DunningSettings(
            tenant="acme",
            policy_toml='name = "c"\nfinal_action = "cancel"\ngaps = [{ days = 1 }]\n',
            event_url=None,
            charge_url=None,
            updated_at=START,
        )
    )
    answer = browser.get("/emails", params={"event": "exhausted"})
    assert "your subscription has been cancelled" in html.unescape(answer.text)


def test_the_preview_is_the_email_the_tenants_settings_make(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.store.messages.put_message_settings(
        MessageSettings(
            tenant="acme",
            smtp_url=None,
            email_from="Acme Billing <billing@acme.example>",
            reply_to="help@acme.example",
            update_card_url="https://app.example/billing?token={token}",
            templates_dir=None,
            allow_unsubscribe=False,
            updated_at=START,
        )
    )
    answer = browser.get("/emails", params={"event": "retry_failed"})
    text = html.unescape(page_text(answer))
    assert "https://app.example/billing?token=SAMPLE-TOKEN" in text
    assert "Thank you, Acme Billing" in text and "help@acme.example" in text
    assert "unsubscribe=1" not in text and "Unsubscribe" not in text  # no opt-out allowed


def test_a_bad_kind_is_a_page_naming_the_field(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    answer = browser.get("/emails", params={"event": "sms"})
    assert answer.status_code in (400, 422)
    assert error_of(answer).startswith("event")
    assert "payment_failed" in error_of(answer)


def test_signed_out_visitors_go_to_the_login(desk: Desk) -> None:
    answer = desk.browser().get("/emails")
    assert answer.status_code == 303 and "/login" in answer.headers["location"]
