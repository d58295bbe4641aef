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
