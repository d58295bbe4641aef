"""The email settings' checks on any text: a value is accepted or refused with
`InvalidInput` naming its field, never another error, and a refused SMTP URL never shows its
password; what is accepted is written one way."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import InvalidInput
from recoup.messages.channel import parse_smtp_url
from recoup.recovery.email_settings import check_address, check_update_card_url

PASSWORD = "Pw0rdNeverShown"


@given(st.text(max_size=400))
def test_any_text_is_an_address_or_an_invalid_input(value: str) -> None:
    try:
        check_address(value, "email_from")
    except InvalidInput as exc:
        assert exc.field == "email_from"


@given(st.text(max_size=300))
def test_any_text_is_a_link_template_or_an_invalid_input(value: str) -> None:
    try:
        accepted = check_update_card_url(value)
    except InvalidInput as exc:
        assert exc.field == "update_card_url"
    else:
        assert "{token}" in accepted


@given(
    st.sampled_from(["smtp", "smtps", "http", "smtp+tls", ""]),
    st.text(max_size=40),
    st.text(max_size=40),
)
def test_any_smtp_url_is_read_or_refused_without_its_password(
    scheme: str, host: str, rest: str
) -> None:
    url = f"{scheme}://user:{PASSWORD}@{host}{rest}"
    try:
        parse_smtp_url(url)
    except InvalidInput as exc:
        assert exc.field == "smtp_url"
        assert PASSWORD not in str(exc) and PASSWORD not in str(exc.value)


@pytest.mark.parametrize(
    ("given_", "stored"),
    [
        ("billing@acme.example", "billing@acme.example"),
        ("Acme Billing <billing@acme.example>", "Acme Billing <billing@acme.example>"),
        ('"Acme, Inc." <billing@acme.example>', '"Acme, Inc." <billing@acme.example>'),
    ],
)
def test_an_address_is_written_one_way(given_: str, stored: str) -> None:
    assert check_address(given_, "email_from") == stored
