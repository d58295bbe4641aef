"""The words of the emails: every default template renders, in the customer's locale and zone,
escapes what it is given, lets a tenant override a file, and composes into one MIME message."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from babel.numbers import get_currency_precision, get_currency_symbol, get_decimal_symbol
from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.errors import InvalidInput
from recoup.messages.composing import compose, message_id_for
from recoup.messages.formatting import check_locale, format_money
from recoup.messages.kinds import MessageKind
from recoup.messages.planning import PlannedMessage, message_key
from recoup.messages.rendering import (
    MessageContext,
    RenderedMessage,
    context_for,
    parse_kind,
    render,
    sample_context,
)

URL = "https://app.example/billing/update?token=abc"


@pytest.mark.parametrize("kind", list(MessageKind))
def test_every_default_template_renders_in_the_tenants_voice(kind: MessageKind) -> None:
    out = render(sample_context(kind, tenant_name="Acme", update_url=URL))
    assert "Acme" in out.subject and "\n" not in out.subject
    for part in (out.text, out.html):
        assert "Alex Doe" in part and "Acme" in part
        assert "$19.99" in part
    # Every email links to the card page: the recovery email to keep another card on file,
    # without the call-to-action button of the ones that ask the customer to act.
    assert URL in out.text
    assert f'href="{URL}"' in out.html.replace("&amp;", "&")
    assert ("Update your card" in out.html) is (kind is not MessageKind.RECOVERED)


def test_the_retry_email_gives_the_next_attempts_local_date() -> None:
    # 2026-06-26T03:30Z is still June 25 in Chicago and already June 26 in Berlin.
    next_at = datetime(2026, 6, 26, 3, 30, tzinfo=UTC)
    base = sample_context(MessageKind.RETRY_FAILED)
    chicago = render(_with(base, next_attempt_at=next_at, timezone="America/Chicago"))
    berlin = render(_with(base, next_attempt_at=next_at, timezone="Europe/Berlin"))
    assert "Thursday, June 25, 2026" in chicago.text
    assert "Friday, June 26, 2026" in berlin.text


def test_the_final_warning_and_the_exhausted_email_name_the_final_action() -> None:
    warning = render(sample_context(MessageKind.FINAL_WARNING, final_action="cancel"))
    assert "your subscription will be cancelled" in warning.text
    assert "one last try" in warning.html
    gone = render(sample_context(MessageKind.EXHAUSTED, final_action="pause_access"))
    assert "your access has been paused" in gone.text
    assert "restore your access" in gone.text


def test_amounts_and_dates_follow_the_customers_locale() -> None:
    fr = render(sample_context(MessageKind.RETRY_FAILED, locale="fr_FR", currency="eur"))
    assert "19,99\xa0€" in fr.text and "vendredi 26 juin 2026" in fr.text
    de = render(sample_context(MessageKind.PAYMENT_FAILED, locale="de-DE", amount=123456))
    assert "1.234,56\xa0$" in de.text
    jp = render(sample_context(MessageKind.RECOVERED, locale="ja_JP", currency="jpy"))
    assert "￥1,999" in jp.text or "¥1,999" in jp.text


def test_an_unknown_locale_falls_back_to_english_but_a_preview_refuses_it() -> None:
    out = render(sample_context(MessageKind.RECOVERED, locale="xx_YY"))
    assert "$19.99" in out.text
    with pytest.raises(InvalidInput) as exc:
        check_locale("xx_YY")
    assert exc.value.field == "locale"


def test_html_is_escaped_and_text_is_not() -> None:
    ctx = sample_context(MessageKind.PAYMENT_FAILED, tenant_name="Tom & Jerry <b>")
    out = render(ctx)
    assert "Tom &amp; Jerry &lt;b&gt;" in out.html and "<b>" not in out.html
    assert "Tom & Jerry <b>" in out.text


def test_only_reminders_offer_an_unsubscribe_link() -> None:
    retry = render(sample_context(MessageKind.RETRY_FAILED, unsubscribe_url="https://u.example/x"))
    assert "https://u.example/x" in retry.text and "Unsubscribe" in retry.html
    notice = render(sample_context(MessageKind.EXHAUSTED, unsubscribe_url="https://u.example/x"))
    assert "https://u.example/x" not in notice.text
    assert "whatever your email preferences" in notice.text
    # A reminder without an opt-out (the tenant allows none) claims neither.
    quiet = render(sample_context(MessageKind.RETRY_FAILED, unsubscribe_url=None))
    assert "Unsubscribe" not in quiet.text and "whatever your email preferences" not in quiet.text


def test_a_tenants_directory_overrides_the_files_it_has(tmp_path: Path) -> None:
    (tmp_path / "payment_failed.subject.txt").write_text("{{ tenant_name }}: card declined\n")
    (tmp_path / "payment_failed.html").write_text("<p>{{ customer_name }} owes {{ amount }}</p>")
    out = render(sample_context(MessageKind.PAYMENT_FAILED), templates_dir=tmp_path)
    assert out.subject == "Acme: card declined"
    assert out.html == "<p>Alex Doe owes $19.99</p>"
    assert "We tried to take your payment" in out.text  # the default text part


def test_a_template_with_an_undefined_name_fails_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "recovered.txt").write_text("Hello {{ custmer_name }}\n")
    with pytest.raises(InvalidInput) as exc:
        render(sample_context(MessageKind.RECOVERED), templates_dir=tmp_path)
    assert exc.value.field == "templates" and exc.value.value == "recovered.txt"


def test_a_missing_templates_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as exc:
        render(sample_context(MessageKind.RECOVERED), templates_dir=tmp_path / "nope")
    assert exc.value.field == "templates_dir"


def test_a_bad_kind_names_the_field_and_the_kinds() -> None:
    with pytest.raises(InvalidInput) as exc:
        parse_kind("payment_faild")
    assert exc.value.field == "event"
    assert "payment_failed" in exc.value.allowed and "card_expiring" in exc.value.allowed


def test_context_for_reads_the_planned_facts() -> None:
    planned = PlannedMessage(
        tenant="acme",
        kind=MessageKind.FINAL_WARNING,
        key=message_key("acme", "evt_1", "final_warning"),
        customer_id="cus_1",
        invoice_id="inv_1",
        send_at=datetime(2026, 6, 23, 15, tzinfo=UTC),
        source="evt_1",
        data={
            "amount": 4200,
            "currency": "gbp",
            "timezone": "Europe/London",
            "attempt": 3,
            "attempts_left": 1,
            "next_attempt_at": "2026-06-26T09:00:00Z",
            "final_action": "pause_access",
        },
    )
    ctx = context_for(
        planned,
        tenant_name="Acme",
        customer_name=None,
        locale="en_GB",
        update_url=URL,
        unsubscribe_url="https://u.example/x",
    )
    assert ctx.next_attempt_at == datetime(2026, 6, 26, 9, tzinfo=UTC)
    assert ctx.unsubscribe_url is None  # a required notice is never opted out of
    assert ctx.sender_name == "Acme" and ctx.invoice_id == "inv_1"
    out = render(ctx)
    assert "£42.00" in out.text and "Friday, 26 June 2026" in out.text
    assert out.text.startswith("Hello,")


def _with(ctx: MessageContext, **changes: object) -> MessageContext:
    from dataclasses import replace

    return replace(ctx, **changes)  # type: ignore[arg-type]


# ---- composing ------------------------------------------------------------------------------

RENDERED = RenderedMessage(subject="Your payment", text="plain words\n", html="<p>rich</p>\n")
DATE = datetime(2026, 6, 23, 15, tzinfo=UTC)


def test_compose_is_text_then_html_with_the_given_message_id() -> None:
    key = message_key("acme", "evt_1", "payment_failed")
    mid = message_id_for(key, "Acme Billing <billing@acme.example>")
    assert mid == f"<{key}@acme.example>"
    msg = compose(
        RENDERED,
        to="Alex <alex@customer.example>",
        sender="Acme Billing <billing@acme.example>",
        reply_to="support@acme.example",
        message_id=mid,
        list_unsubscribe=None,
        date=DATE,
    )
    parsed = msg.parsed()
    assert parsed.get_content_type() == "multipart/alternative"
    parts = [p.get_content_type() for p in parsed.iter_parts()]  # type: ignore[attr-defined]
    assert parts == ["text/plain", "text/html"]
    assert parsed["Message-ID"] == mid
    assert parsed["From"] == "Acme Billing <billing@acme.example>"
    assert parsed["Reply-To"] == "support@acme.example"
    assert parsed["Date"] == "Tue, 23 Jun 2026 15:00:00 +0000"
    assert "List-Unsubscribe" not in parsed and "List-Unsubscribe-Post" not in parsed


def test_compose_adds_one_click_unsubscribe_only_when_given() -> None:
    msg = compose(
        RENDERED,
        to="alex@customer.example",
        sender="billing@acme.example",
        reply_to=None,
        message_id="k1@acme.example",
        list_unsubscribe="https://acme.example/unsub?t=1",
        date=DATE,
    ).parsed()
    assert msg["List-Unsubscribe"] == "<https://acme.example/unsub?t=1>"
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert msg["Message-ID"] == "<k1@acme.example>"
    assert "Reply-To" not in msg


def test_compose_refuses_a_header_with_a_line_break() -> None:
    with pytest.raises(InvalidInput) as exc:
        compose(
            RENDERED,
            to="alex@customer.example\r\nBcc: evil@x.example",
            sender="billing@acme.example",
            reply_to=None,
            message_id="k",
            list_unsubscribe=None,
            date=DATE,
        )
    assert exc.value.field == "to"


# ---- money ----------------------------------------------------------------------------------

LOCALES = ["en_US", "en_GB", "de_DE", "fr_FR", "ja_JP", "hi_IN", "pt_BR", "ar_EG"]
CURRENCIES = ["USD", "EUR", "JPY", "GBP", "KWD", "INR", "BRL"]


@settings(max_examples=200, deadline=None)
@given(
    minor=st.integers(0, 10**12),
    locale=st.sampled_from(LOCALES),
    currency=st.sampled_from(CURRENCIES),
)
def test_an_amount_reads_back_as_the_same_value_in_every_locale(
    minor: int, locale: str, currency: str
) -> None:
    text = format_money(minor, currency.lower(), locale)
    digits = get_currency_precision(currency)
    decimal = get_decimal_symbol(locale)  # of the Latin digits babel writes money in
    number = text.replace(get_currency_symbol(currency, locale), "")  # "د.ك." has dots
    kept = "".join(c for c in number if c.isdigit() or c == decimal)
    whole, _, fraction = kept.partition(decimal)
    assert len(fraction) == digits
    assert Decimal(f"{whole}.{fraction}" if fraction else whole) == Decimal(minor).scaleb(-digits)
