"""Signed session cookies and CSRF tokens (recoup.api.dashboard.sessions), and the formatting
the pages use for money and instants: pure, on a wall clock the test moves."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.api.dashboard import SECRET_ENV, session_key_from_env
from recoup.api.dashboard.rendering import local, money, when
from recoup.api.dashboard.sessions import SESSION_SECONDS, Sessions
from recoup.errors import InvalidInput

KEY = b"k" * 32
HASH = "ab" * 32
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."


class Wall:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_cookie_reads_back_as_its_session_until_it_expires() -> None:
    wall = Wall()
    sessions = Sessions(KEY, wall=wall)
    cookie, issued = sessions.issue("acme", HASH)
    assert sessions.read(cookie) == issued
    assert issued.tenant == "acme" and issued.token_hash == HASH
    wall.now += SESSION_SECONDS - 1
    assert sessions.read(cookie) == issued
    wall.now += 1
    assert sessions.read(cookie) is None


def test_a_cookie_signed_under_another_key_is_refused() -> None:
    cookie, _ = Sessions(b"x" * 32, wall=Wall()).issue("acme", HASH)
    assert Sessions(KEY, wall=Wall()).read(cookie) is None


def test_every_session_has_its_own_csrf_token_and_accepts_only_it() -> None:
    sessions = Sessions(KEY, wall=Wall())
    _, first = sessions.issue("acme", HASH)
    _, second = sessions.issue("acme", HASH)
    token = sessions.csrf_token(first)
    assert token != sessions.csrf_token(second)
    assert sessions.csrf_ok(first, token)
    assert not sessions.csrf_ok(second, token)
    assert not sessions.csrf_ok(first, None)
    assert not sessions.csrf_ok(first, "")
    assert not sessions.csrf_ok(first, "ü" + token[1:])  # non-ASCII: refused, not an error


@given(st.text(max_size=300))
def test_no_cookie_text_but_ours_reads_as_a_session(text: str) -> None:
    assert Sessions(KEY, wall=Wall()).read(text) is None


def decoded(cookie: str) -> tuple[bytes, bytes] | None:
    """What a cookie's two parts decode to (base64's padding bits can absorb a change)."""
    try:
        payload, signature = cookie.split(".")
        return (
            base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)),
            base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)),
        )
    except ValueError:
        return None


@given(st.integers(min_value=0, max_value=2000), st.sampled_from(ALPHABET))
def test_a_cookie_changed_anywhere_is_refused(position: int, character: str) -> None:
    sessions = Sessions(KEY, wall=Wall())
    cookie, _ = sessions.issue("acme", HASH)
    index = position % len(cookie)
    altered = cookie[:index] + character + cookie[index + 1 :]
    if decoded(altered) != decoded(cookie):
        assert sessions.read(altered) is None


def test_the_login_double_submit_needs_both_halves_equal() -> None:
    token = Sessions.login_token()
    assert Sessions.login_ok(token, token)
    assert not Sessions.login_ok(None, token)
    assert not Sessions.login_ok(token, None)
    assert not Sessions.login_ok(token, token + "x")
    assert not Sessions.login_ok("", "")


def test_a_configured_secret_makes_the_same_key_in_every_process() -> None:
    secret = "s" * 40
    assert session_key_from_env({SECRET_ENV: secret}) == session_key_from_env({SECRET_ENV: secret})
    assert session_key_from_env({}) is None
    with pytest.raises(InvalidInput) as refused:
        session_key_from_env({SECRET_ENV: "short"})
    assert refused.value.field == SECRET_ENV and "short" not in str(refused.value)


EXPONENTS = {"usd": 2, "eur": 2, "jpy": 0, "krw": 0, "kwd": 3, "bhd": 3}


@given(st.integers(min_value=1, max_value=10**15), st.sampled_from(sorted(EXPONENTS)))
def test_money_shows_minor_units_exactly_in_the_currencys_decimals(
    amount: int, currency: str
) -> None:
    shown = money(amount, currency)
    number, code = shown.split(" ")
    assert code == currency.upper()
    decimals = number.split(".")[1] if "." in number else ""
    assert len(decimals) == EXPONENTS[currency]
    assert Decimal(number) * 10 ** EXPONENTS[currency] == amount


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    )
)
def test_instants_show_in_utc_and_on_a_zones_wall_clock(instant: datetime) -> None:
    shown = when(instant)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", shown)
    assert datetime.strptime(shown, "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC) == (
        instant.replace(microsecond=0)
    )
    tokyo = local(instant, "Asia/Tokyo")  # UTC+9, no DST
    assert tokyo == (instant + timedelta(hours=9)).strftime("%Y-%m-%d %H:%M JST")
