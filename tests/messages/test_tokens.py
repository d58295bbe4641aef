"""Update-card tokens: one issued verifies with its secret and names what it was issued for;
it cannot be forged (any change, another secret), used after it expires, or moved to another
customer; a rotation's list of secrets keeps old links working."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recoup.receiver
from recoup.errors import InvalidInput
from recoup.jobs.signing import new_signing_secret
from recoup.messages.tokens import (
    InvalidUpdateToken,
    TokenProblem,
    UpdateToken,
    issue_update_token,
    verify_update_token,
)

SECRET = new_signing_secret()
OTHER = new_signing_secret()
NOW = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)
EXPIRES = NOW + timedelta(days=14)


def issue(**kw: object) -> str:
    args: dict[str, object] = {
        "tenant": "acme",
        "customer_id": "cus_1",
        "invoice_id": "inv_1",
        "expires_at": EXPIRES,
    } | kw
    return issue_update_token(SECRET, **args)  # type: ignore[arg-type]


def problem_of(token: str, secret: str | list[str] = SECRET, **kw: object) -> TokenProblem:
    with pytest.raises(InvalidUpdateToken) as exc:
        verify_update_token(token, secret, now=kw.pop("now", NOW), **kw)  # type: ignore[arg-type]
    return exc.value.problem


def test_a_token_verifies_and_names_tenant_customer_invoice_and_expiry() -> None:
    token = issue()
    assert token.startswith("rut1.") and len(token) < 200
    assert verify_update_token(token, SECRET, now=NOW, customer_id="cus_1") == UpdateToken(
        tenant="acme", customer_id="cus_1", invoice_id="inv_1", expires_at=EXPIRES
    )
    reminder = issue(invoice_id=None)
    assert verify_update_token(reminder, SECRET, now=NOW).invoice_id is None


def test_the_receiver_library_exports_the_same_call() -> None:
    assert recoup.receiver.verify_update_token is verify_update_token
    assert recoup.receiver.InvalidUpdateToken is InvalidUpdateToken


def test_a_token_is_url_safe() -> None:
    assert set(issue()) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def test_it_expires_at_its_instant_and_not_before() -> None:
    token = issue()
    assert verify_update_token(token, SECRET, now=EXPIRES - timedelta(seconds=1))
    assert problem_of(token, now=EXPIRES) is TokenProblem.EXPIRED
    assert problem_of(token, now=EXPIRES + timedelta(days=300)) is TokenProblem.EXPIRED


def test_it_cannot_be_moved_to_another_customer() -> None:
    assert problem_of(issue(), customer_id="cus_2") is TokenProblem.ANOTHER_CUSTOMER


def test_another_tenants_secret_does_not_verify_it() -> None:
    assert problem_of(issue(), OTHER) is TokenProblem.BAD_SIGNATURE


def test_during_a_rotation_either_secret_verifies() -> None:
    old = issue()
    assert verify_update_token(old, [OTHER, SECRET], now=NOW).customer_id == "cus_1"
    assert problem_of(old, [OTHER]) is TokenProblem.BAD_SIGNATURE


def test_a_token_is_not_the_webhook_signature_of_its_claims() -> None:
    # The key is derived from the secret: the secret itself used as the MAC key gives another.
    import base64
    import hashlib
    import hmac

    token = issue()
    signed, _, mac = token.rpartition(".")
    raw = base64.b64decode(SECRET.removeprefix("whsec_"))
    plain = base64.urlsafe_b64encode(hmac.new(raw, signed.encode(), hashlib.sha256).digest())
    assert plain.rstrip(b"=").decode() != mac


@pytest.mark.parametrize(
    "token",
    ["", "rut1", "rut1..", "rut2.e30.AAAA", "a.b.c.d", "rut1.e30.***", "rut1.é.x", "x" * 5000],
)
def test_malformed_tokens_are_refused(token: str) -> None:
    assert problem_of(token) in (TokenProblem.MALFORMED, TokenProblem.BAD_SIGNATURE)


def test_a_bad_secret_is_a_configuration_error_that_hides_it() -> None:
    with pytest.raises(InvalidInput) as exc:
        verify_update_token(issue(), "whsec_", now=NOW)
    assert exc.value.field == "secret" and exc.value.value == "(hidden)"
    with pytest.raises(InvalidInput):
        verify_update_token(issue(), [], now=NOW)


def test_issuing_refuses_a_naive_expiry_and_empty_ids() -> None:
    with pytest.raises(InvalidInput):
        issue(expires_at=datetime(2026, 7, 1))
    with pytest.raises(InvalidInput) as exc:
        issue(customer_id="")
    assert exc.value.field == "customer_id"


ids = st.text(min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    tenant=ids,
    customer=ids,
    invoice=st.none() | ids,
    lifetime=st.integers(1, 90 * 86_400),
    index=st.integers(0, 10_000),
    replacement=st.sampled_from("AQgw_-.xZ9"),
)
def test_any_change_to_a_token_is_refused(
    tenant: str, customer: str, invoice: str | None, lifetime: int, index: int, replacement: str
) -> None:
    expires = NOW + timedelta(seconds=lifetime)
    token = issue_update_token(
        SECRET, tenant=tenant, customer_id=customer, invoice_id=invoice, expires_at=expires
    )
    found = verify_update_token(token, SECRET, now=NOW, customer_id=customer)
    assert (found.tenant, found.customer_id, found.invoice_id) == (tenant, customer, invoice)
    assert found.expires_at == datetime.fromtimestamp(int(expires.timestamp()), UTC)
    i = index % len(token)
    changed = token[:i] + replacement + token[i + 1 :]
    if changed != token:
        with pytest.raises(InvalidUpdateToken):
            verify_update_token(changed, SECRET, now=NOW)


@settings(max_examples=100, deadline=None)
@given(customer=ids, other=ids, lifetime=st.integers(1, 90 * 86_400), late=st.integers(0, 10**8))
def test_no_token_serves_another_customer_or_after_its_expiry(
    customer: str, other: str, lifetime: int, late: int
) -> None:
    expires = NOW + timedelta(seconds=lifetime)
    token = issue_update_token(
        SECRET, tenant="acme", customer_id=customer, invoice_id=None, expires_at=expires
    )
    if other != customer:
        with pytest.raises(InvalidUpdateToken):
            verify_update_token(token, SECRET, now=NOW, customer_id=other)
    with pytest.raises(InvalidUpdateToken):
        verify_update_token(token, SECRET, now=expires + timedelta(seconds=late))
