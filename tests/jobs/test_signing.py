"""Outbound signatures (`recoup.jobs.signing`) computed with `hmac` directly are exactly what the
`standardwebhooks` library computes and verifies, for any secret, id, instant and body."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks import Webhook

from recoup.jobs.signing import new_signing_secret, signature_headers

secrets_ = st.binary(min_size=1, max_size=64).flatmap(
    lambda key: st.sampled_from(
        [
            "whsec_" + base64.b64encode(key).decode(),
            base64.b64encode(key).decode(),  # the prefix is optional
            "whsec_" + base64.b64encode(key).decode().rstrip("="),  # so is the padding
        ]
    )
)
instants = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@given(
    secret=secrets_,
    message_id=st.text(min_size=1, max_size=40),
    instant=instants,
    body=st.text(max_size=300),
)
def test_our_signature_is_the_librarys(
    secret: str, message_id: str, instant: datetime, body: str
) -> None:
    headers = signature_headers(secret=secret, message_id=message_id, timestamp=instant, body=body)
    expected = Webhook(secret).sign(msg_id=message_id, timestamp=instant, data=body)
    assert headers["webhook-signature"] == expected
    assert headers["webhook-id"] == message_id
    assert headers["webhook-timestamp"] == str(int(instant.timestamp()))


@given(body=st.text(max_size=300), offset=st.integers(min_value=-240, max_value=240))
def test_a_receiver_verifies_a_request_signed_now(body: str, offset: int) -> None:
    secret = new_signing_secret()
    sent = datetime.now(UTC) + timedelta(seconds=offset)  # within the library's 5 minutes
    headers = signature_headers(secret=secret, message_id="job_1", timestamp=sent, body=body)
    Webhook(secret).verify(body, headers, json_parse=False)  # raises on a wrong signature


def test_a_signature_in_another_zone_is_the_same_instants() -> None:
    secret = new_signing_secret()
    utc = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    elsewhere = utc.astimezone(timezone(timedelta(hours=-5)))
    assert signature_headers(
        secret=secret, message_id="m", timestamp=utc, body="{}"
    ) == signature_headers(secret=secret, message_id="m", timestamp=elsewhere, body="{}")


def test_an_empty_secret_is_refused() -> None:
    with pytest.raises(ValueError):
        signature_headers(secret="whsec_", message_id="m", timestamp=datetime.now(UTC), body="")
