"""Contact details as Recoup accepts them (`recovery.contacts`): one form for each, and the
stated patterns the same rule as the checks."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import InvalidInput
from recoup.recovery.contacts import (
    EMAIL_PATTERN,
    LOCALE_PATTERN,
    email_address,
    locale_tag,
    same_address,
)


@pytest.mark.parametrize(
    ("given_", "written"),
    [
        ("en", "en"),
        ("EN", "en"),
        ("en_US", "en_US"),
        ("de-DE", "de_DE"),  # BCP 47 → babel
        ("de_de", "de_DE"),
        ("zh-hant-tw", "zh_Hant_TW"),  # a script
        ("es-419", "es_419"),  # a UN M.49 region (Latin America)
    ],
)
def test_a_locale_is_written_babels_way(given_: str, written: str) -> None:
    assert locale_tag(given_) == written


@pytest.mark.parametrize("bad", ["english", "en-USA", "en_US.UTF-8", "e", "en--US", ""])
def test_a_locale_that_is_none_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        locale_tag(bad)
    assert raised.value.field == "locale"


@given(st.from_regex(LOCALE_PATTERN, fullmatch=True))
def test_every_locale_the_document_allows_is_accepted_and_written_once(text: str) -> None:
    tag = locale_tag(text)
    assert locale_tag(tag) == tag
    assert locale_tag(tag.replace("_", "-")) == tag


@given(st.from_regex(EMAIL_PATTERN, fullmatch=True).filter(lambda t: len(t) <= 254))
def test_every_address_the_document_allows_is_accepted_and_written_once(text: str) -> None:
    address = email_address(text)
    assert email_address(address) == address
    assert same_address(address, text)


@pytest.mark.parametrize(
    "bad",
    [
        "ada",
        "ada@localhost",  # a bare host name
        "Ada <ada@example.com>",  # a display name
        '"ada"@example.com',  # a quoted local part
        "ada@[192.0.2.1]",  # a domain literal
        "ada@example..com",
        ".ada@example.com",
        "ada@example.com\n",
        "ada@-example.com",
        "a" * 250 + "@example.com",  # longer than RFC 5321 allows
    ],
)
def test_an_address_that_is_none_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        email_address(bad)
    assert raised.value.field == "customer_email"


def test_the_domain_is_lower_cased_and_the_local_part_kept() -> None:
    assert email_address("Ada.L+billing@Mail.Example.COM") == "Ada.L+billing@mail.example.com"
    assert re.fullmatch(EMAIL_PATTERN, "Ada.L+billing@Mail.Example.COM")


# As the Stripe intake reads them


def test_a_stripe_failure_carries_its_customers_address_name_and_locale() -> None:
    from recoup.recovery.stripe_events import InvoiceFailed, event_head, read_event
    from tests.recovery.stripe_payloads import customer, event, invoice

    body = invoice()
    body["customer_name"] = "Jenny Rosen"
    expanded = customer()
    expanded["preferred_locales"] = ["de-DE", "en"]
    body["customer"] = expanded
    failed = read_event(event_head(event("invoice.payment_failed", body)), default_timezone="UTC")
    assert isinstance(failed, InvoiceFailed)
    assert (failed.contact.email, failed.contact.name, failed.contact.locale) == (
        "jenny@example.com",
        "Jenny Rosen",
        "de_DE",
    )


def test_a_stripe_address_recoup_cannot_use_is_left_out_noted() -> None:
    from recoup.recovery.stripe_events import InvoiceFailed, event_head, read_event
    from tests.recovery.stripe_payloads import event, invoice

    body = invoice()
    body["customer_email"] = "jenny at example"
    failed = read_event(event_head(event("invoice.payment_failed", body)), default_timezone="UTC")
    assert isinstance(failed, InvoiceFailed)
    assert failed.contact.email is None and failed.contact.locale is None
    assert any("address" in note for note in failed.notes)
