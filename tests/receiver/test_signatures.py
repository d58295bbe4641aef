"""Signature checks: what Recoup signs passes; tampering, a wrong secret, staleness and
malformed headers are refused with an error naming the header."""

from __future__ import annotations

from datetime import timedelta

import pytest

from recoup.errors import InvalidInput
from recoup.jobs.signing import new_signing_secret
from recoup.receiver import (
    SignatureError,
    TimestampOutOfTolerance,
    verify_signature,
)
from recoup.receiver.signatures import check_secrets

from .conftest import NOW, SECRET, body_of, signed


def test_a_request_signed_by_recoup_verifies() -> None:
    headers, raw = signed(body_of())
    message = verify_signature(headers, raw, secret=SECRET, now=NOW)
    assert message.id == "job_retry:inv_1:2"
    assert message.timestamp == NOW


def test_header_names_match_in_any_case() -> None:
    headers, raw = signed(body_of())
    upper = {name.upper(): value for name, value in headers.items()}
    verify_signature(upper, raw, secret=SECRET, now=NOW)


def test_a_tampered_body_is_refused() -> None:
    headers, raw = signed(body_of(amount=1999))
    tampered = raw.replace(b"1999", b"1")
    with pytest.raises(SignatureError, match="webhook-signature: no v1 signature matches"):
        verify_signature(headers, tampered, secret=SECRET, now=NOW)


def test_re_serialised_json_is_refused_because_only_the_exact_bytes_are_signed() -> None:
    headers, raw = signed(body_of())
    with pytest.raises(SignatureError):
        verify_signature(headers, raw.replace(b", ", b","), secret=SECRET, now=NOW)


def test_a_tampered_id_or_timestamp_is_refused() -> None:
    headers, raw = signed(body_of())
    with pytest.raises(SignatureError, match="no v1 signature"):
        verify_signature({**headers, "webhook-id": "job_other"}, raw, secret=SECRET, now=NOW)
    moved = str(int(NOW.timestamp()) + 1)
    with pytest.raises(SignatureError, match="no v1 signature"):
        verify_signature({**headers, "webhook-timestamp": moved}, raw, secret=SECRET, now=NOW)


def test_another_tenants_secret_is_refused() -> None:
    headers, raw = signed(body_of(), secret=new_signing_secret())
    with pytest.raises(SignatureError):
        verify_signature(headers, raw, secret=SECRET, now=NOW)


def test_during_a_rotation_either_secret_verifies() -> None:
    old, new = SECRET, new_signing_secret()
    headers, raw = signed(body_of(), secret=old)
    verify_signature(headers, raw, secret=[new, old], now=NOW)


def test_a_signature_list_passes_when_any_v1_entry_matches() -> None:
    headers, raw = signed(body_of())
    good = headers["webhook-signature"]
    mixed = f"v1a,c2lnbmF0dXJl v1,bm90IGl0 garbage v1,%%% {good}"
    verify_signature({**headers, "webhook-signature": mixed}, raw, secret=SECRET, now=NOW)


@pytest.mark.parametrize(
    ("offset", "accepted"),
    [
        (timedelta(minutes=5), True),  # exactly at the tolerance: still accepted
        (timedelta(minutes=-5), True),
        (timedelta(minutes=5, seconds=1), False),  # an old request replayed
        (timedelta(minutes=-5, seconds=-1), False),  # a sender clock far ahead
    ],
)
def test_timestamps_beyond_the_tolerance_are_refused(offset: timedelta, accepted: bool) -> None:
    headers, raw = signed(body_of(), at=NOW)
    now = NOW + offset
    if accepted:
        verify_signature(headers, raw, secret=SECRET, now=now)
        return
    with pytest.raises(TimestampOutOfTolerance, match=r"webhook-timestamp: .* is too"):
        verify_signature(headers, raw, secret=SECRET, now=now)


def test_the_tolerance_is_configurable() -> None:
    headers, raw = signed(body_of(), at=NOW)
    with pytest.raises(TimestampOutOfTolerance):
        verify_signature(
            headers,
            raw,
            secret=SECRET,
            now=NOW + timedelta(seconds=31),
            tolerance=timedelta(seconds=30),
        )


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_named(missing: str) -> None:
    headers, raw = signed(body_of())
    del headers[missing]
    with pytest.raises(SignatureError, match=f"{missing}: the header is missing"):
        verify_signature(headers, raw, secret=SECRET, now=NOW)


@pytest.mark.parametrize("value", ["1.5e9", "soon", "-17", "2026-12-02T16:12:00Z"])
def test_a_timestamp_that_is_not_integer_seconds_is_refused(value: str) -> None:
    headers, raw = signed(body_of())
    with pytest.raises(SignatureError, match=r"webhook-timestamp: .* is not integer Unix seconds"):
        verify_signature({**headers, "webhook-timestamp": value}, raw, secret=SECRET, now=NOW)


def test_a_body_that_is_not_utf8_is_refused() -> None:
    headers, _ = signed(body_of())
    with pytest.raises(SignatureError, match="body: not UTF-8"):
        verify_signature(headers, b"\xff\xfe", secret=SECRET, now=NOW)


@pytest.mark.parametrize("bad", ["whsec_", "whsec_!!not base64!!", ""])
def test_a_bad_secret_is_a_configuration_error_that_hides_the_secret(bad: str) -> None:
    with pytest.raises(InvalidInput, match="secret") as caught:
        check_secrets(bad)
    assert "not base64" not in str(caught.value)


def test_no_secret_at_all_is_refused() -> None:
    with pytest.raises(InvalidInput, match="at least one"):
        check_secrets([])
