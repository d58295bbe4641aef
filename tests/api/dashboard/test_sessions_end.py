"""Sessions end when they end, on both backends (issue 24): a logout ends the session on the
server, so a copy of its cookie no longer works; revoking the token ends it too; failed logins
are throttled per address and across addresses; over HTTPS the cookies carry `__Host-`."""

from __future__ import annotations

from recoup.api.dashboard.sessions import HOST_PREFIX, LOGIN_COOKIE, SESSION_COOKIE
from recoup.api.dashboard.throttle import LoginThrottle
from recoup.api.dashboard.web import DashboardState
from tests.api.dashboard.desk import START, Desk, csrf_of


def test_a_copied_session_cookie_stops_working_after_logout(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    copied = browser.cookies[SESSION_COOKIE]
    csrf = csrf_of(browser.get("/jobs").text)
    assert browser.post("/logout", data={"csrf": csrf}).status_code == 303
    thief = desk.browser()
    thief.cookies.set(SESSION_COOKIE, copied)
    answer = thief.get("/jobs")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login")
    # A new sign-in with the same token is a new session, which works.
    again = desk.sign_in(desk_token := desk.tenant("acme2"))
    assert again.get("/jobs").status_code == 200 and desk_token


def test_revoking_the_token_ends_a_copied_session_too(desk: Desk) -> None:
    token = desk.tenant("acme")
    copied = desk.sign_in(token).cookies[SESSION_COOKIE]
    (info,) = desk.tables.list_tokens("acme")
    desk.tables.revoke_token(info.id, now=START)
    thief = desk.browser()
    thief.cookies.set(SESSION_COOKIE, copied)
    assert thief.get("/jobs").status_code == 303


def failed_login(browser: object, token: str = "rk_wrong") -> int:
    form = browser.get("/login")  # type: ignore[attr-defined]
    answer = browser.post("/login", data={"csrf": csrf_of(form.text), "token": token})  # type: ignore[attr-defined]
    return int(answer.status_code)


def test_failed_logins_from_one_address_are_throttled_before_the_token_is_read(
    desk: Desk,
) -> None:
    token = desk.tenant("acme")
    browser = desk.browser()
    statuses = [failed_login(browser) for _ in range(10)]
    assert statuses == [401] * 10
    form = browser.get("/login")
    throttled = browser.post("/login", data={"csrf": csrf_of(form.text), "token": token})
    assert throttled.status_code == 429  # even the right token: nothing is looked up
    assert int(throttled.headers["retry-after"]) > 0
    assert SESSION_COOKIE not in browser.cookies


def test_the_throttle_counts_per_address_and_across_addresses() -> None:
    now = [0.0]
    throttle = LoginThrottle(per_address=3, per_tenant=5, window=60, monotonic=lambda: now[0])
    for _ in range(3):
        throttle.failed("10.0.0.1")
    assert throttle.wait("10.0.0.1") == 60 and throttle.wait("10.0.0.2") == 0
    throttle.failed("10.0.0.2")
    throttle.failed("10.0.0.3")
    assert throttle.wait("10.0.0.9") == 60  # five failures in all: every address waits
    now[0] = 61
    assert throttle.wait("10.0.0.1") == 0 and throttle.wait("10.0.0.9") == 0
    throttle.failed("10.0.0.1")
    throttle.succeeded("10.0.0.1")
    assert throttle.wait("10.0.0.1") == 0


def test_over_https_the_cookies_carry_the_host_prefix_and_the_path_it_needs(desk: Desk) -> None:
    token = desk.tenant("acme")
    browser = desk.browser(base_url="https://dashboard.test")
    form = browser.get("/login")
    login_cookie = form.headers["set-cookie"]
    assert login_cookie.startswith(HOST_PREFIX + LOGIN_COOKIE + "=")
    assert "path=/;" in login_cookie.lower() + ";" and "secure" in login_cookie.lower()
    answer = browser.post("/login", data={"csrf": csrf_of(form.text), "token": token})
    assert answer.status_code == 303, answer.text
    assert HOST_PREFIX + SESSION_COOKIE in answer.headers["set-cookie"]
    assert browser.get("/jobs").status_code == 200
    # Over plain HTTP the names have no prefix (a browser refuses `__Host-` without Secure).
    plain = desk.browser()
    assert plain.get("/login").headers["set-cookie"].startswith(LOGIN_COOKIE + "=")


def test_the_dashboard_state_has_a_throttle_of_its_own(desk: Desk) -> None:
    state = desk.app.state.dashboard
    assert isinstance(state, DashboardState) and isinstance(state.throttle, LoginThrottle)
