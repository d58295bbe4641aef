"""The dashboard's guards, in-process on both backends: every page needs a session made from
an active token, every action needs the session's CSRF token, and a tenant never sees or
touches another tenant's jobs or invoices (their ids answer 404, as in the API)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from recoup.api.dashboard.sessions import LOGIN_COOKIE, SESSION_COOKIE
from recoup.dunning.invoice import InvoiceState
from recoup.jobs.model import JobState
from tests.api.dashboard.desk import START, Desk, csrf_of, page_text

PAGES = ["/", "/jobs", "/jobs?state=scheduled", "/schedules", "/invoices", "/invoices/inv_1"]


@pytest.mark.parametrize("path", PAGES)
def test_a_page_without_a_session_sends_the_visitor_to_login_and_back(
    desk: Desk, path: str
) -> None:
    token = desk.tenant("acme")
    desk.invoice("acme", "inv_1")
    browser = desk.browser()
    answer = browser.get(path)
    assert answer.status_code == 303
    location = urlsplit(answer.headers["location"])
    assert location.path == "/login"
    assert parse_qs(location.query)["next"] == [path]
    form = browser.get(answer.headers["location"])
    signed_in = browser.post(
        "/login", data={"csrf": csrf_of(form.text), "token": token, "next": path}
    )
    assert signed_in.status_code == 303 and signed_in.headers["location"] == path
    assert browser.get(path).status_code in (200, 303)  # "/" forwards to the job list


def test_an_action_without_a_session_changes_nothing(desk: Desk) -> None:
    desk.tenant("acme")
    job = desk.job("acme", "nightly")
    answer = desk.browser().post(f"/jobs/{job.id}/cancel", data={"csrf": "x"})
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login")
    assert desk.scheduler.get(job.id, tenant="acme").state is JobState.SCHEDULED


@pytest.mark.parametrize(
    "token",
    [
        "rcp_" + "A" * 43,  # the right shape, never issued
        "not-a-token",
        "",
        "rcp_" + "x" * 500,  # over the length any token has
    ],
)
def test_a_token_that_is_not_active_is_refused_and_no_session_is_made(
    desk: Desk, token: str
) -> None:
    desk.tenant("acme")
    browser = desk.browser()
    form = browser.get("/login")
    answer = browser.post("/login", data={"csrf": csrf_of(form.text), "token": token})
    assert answer.status_code == 401
    assert "not an active API token" in answer.text
    assert SESSION_COOKIE not in browser.cookies
    assert browser.get("/jobs").status_code == 303


def test_revoking_the_token_ends_its_sessions_at_once(desk: Desk) -> None:
    token = desk.tenant("acme")
    browser = desk.sign_in(token)
    assert browser.get("/jobs").status_code == 200
    (info,) = desk.tables.list_tokens("acme")
    desk.tables.revoke_token(info.id, now=START)
    answer = browser.get("/jobs")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login")
    assert SESSION_COOKIE not in browser.cookies  # the stale cookie is cleared


def test_an_altered_session_cookie_is_refused(desk: Desk) -> None:
    acme, other = desk.tenant("acme"), desk.tenant("other")
    cookie = desk.sign_in(acme).cookies[SESSION_COOKIE]
    payload, signature = cookie.split(".")
    other_payload = desk.sign_in(other).cookies[SESSION_COOKIE].split(".")[0]
    for forged in (f"{other_payload}.{signature}", f"{payload}.{signature[:-2]}AA", payload):
        browser = desk.browser()
        browser.cookies.set(SESSION_COOKIE, forged)
        assert browser.get("/jobs").status_code == 303, forged


def test_the_login_form_needs_its_own_double_submit_token(desk: Desk) -> None:
    token = desk.tenant("acme")
    browser = desk.browser()
    csrf = csrf_of(browser.get("/login").text)
    assert browser.post("/login", data={"token": token}).status_code == 403
    assert browser.post("/login", data={"csrf": csrf + "x", "token": token}).status_code == 403
    stranger = desk.browser()  # a cross-site form: the value, but not the cookie
    assert stranger.post("/login", data={"csrf": csrf, "token": token}).status_code == 403
    assert SESSION_COOKIE not in browser.cookies and SESSION_COOKIE not in stranger.cookies


@pytest.mark.parametrize("csrf", [None, "", "wrong", "é" * 10, "other-session"])
def test_an_action_without_this_sessions_csrf_token_is_forbidden(
    desk: Desk, csrf: str | None
) -> None:
    token = desk.tenant("acme")
    job = desk.job("acme", "nightly")
    desk.invoice("acme", "inv_1")
    browser = desk.sign_in(token)
    if csrf == "other-session":  # the same tenant, signed in elsewhere
        csrf = csrf_of(desk.sign_in(token).get(f"/jobs/{job.id}").text)
    data = {} if csrf is None else {"csrf": csrf}
    for path, fields in (
        (f"/jobs/{job.id}/cancel", {}),
        (f"/jobs/{job.id}/retry", {}),
        ("/invoices/inv_1/paid", {}),
        ("/invoices/inv_1/cancel", {"reason": "gone"}),
        ("/bulk/jobs", {"action": "cancel", "name": "nightly"}),
        ("/bulk/invoices", {"action": "paid"}),
        ("/logout", {}),
    ):
        answer = browser.post(path, data={**data, **fields})
        assert answer.status_code == 403, path
        assert "CSRF" in answer.text
    assert desk.scheduler.get(job.id, tenant="acme").state is JobState.SCHEDULED
    assert desk.dunning.get("acme", "inv_1").state is InvoiceState.RETRYING
    assert browser.get("/jobs").status_code == 200  # still signed in


def test_another_tenants_ids_are_404_and_never_listed(desk: Desk) -> None:
    acme, rival = desk.tenant("acme"), desk.tenant("rival")
    desk.job("acme", "acme-job", group="g1")
    theirs = desk.job("rival", "rival-secret-job", group="g1")
    desk.invoice("acme", "inv_shared", amount=1111)
    desk.invoice("rival", "inv_shared", amount=2222)  # the same invoice id, another tenant
    desk.invoice("rival", "inv_rival_only")
    browser = desk.sign_in(acme)

    for path in ("/jobs", "/jobs?group=g1", "/jobs?name=rival", "/invoices"):
        text = page_text(browser.get(path))
        assert "rival-secret-job" not in text and "inv_rival_only" not in text, path
    assert "acme-job" in page_text(browser.get("/jobs?group=g1"))
    assert browser.get(f"/jobs/{theirs.id}").status_code == 404
    assert browser.get("/invoices/inv_rival_only").status_code == 404
    shared = page_text(browser.get("/invoices/inv_shared"))
    assert "11.11 USD" in shared and "22.22 USD" not in shared

    csrf = csrf_of(browser.get("/jobs").text)
    assert browser.post(f"/jobs/{theirs.id}/cancel", data={"csrf": csrf}).status_code == 404
    assert browser.post("/invoices/inv_rival_only/paid", data={"csrf": csrf}).status_code == 404
    assert desk.scheduler.get(theirs.id, tenant="rival").state is JobState.SCHEDULED
    assert desk.dunning.get("rival", "inv_rival_only").state is InvoiceState.RETRYING

    rival_view = page_text(desk.sign_in(rival).get("/jobs"))
    assert "rival-secret-job" in rival_view and "acme-job" not in rival_view


def test_cookies_are_httponly_samesite_and_secure_over_https(desk: Desk) -> None:
    token = desk.tenant("acme")
    for base_url, secure in (("http://dashboard.test", False), ("https://dashboard.test", True)):
        browser = desk.browser(base_url=base_url)
        form = browser.get("/login")
        answer = browser.post("/login", data={"csrf": csrf_of(form.text), "token": token})
        for cookie_header in (form.headers["set-cookie"], answer.headers["set-cookie"]):
            flags = cookie_header.lower()
            assert "httponly" in flags and "samesite=lax" in flags
            assert ("; secure" in flags) is secure
        assert LOGIN_COOKIE in form.headers["set-cookie"]
        assert token not in answer.headers["set-cookie"]  # the session holds no token


def test_signing_out_forgets_the_session(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    csrf = csrf_of(browser.get("/jobs").text)
    answer = browser.post("/logout", data={"csrf": csrf})
    assert answer.status_code == 303 and answer.headers["location"] == "/login"
    assert browser.get("/jobs").status_code == 303


@pytest.mark.parametrize(
    ("given", "lands"),
    [
        ("/invoices?state=retrying", "/invoices?state=retrying"),
        ("//evil.example/x", "/jobs"),  # another host
        ("https://evil.example/", "/jobs"),
        ("/\\evil.example", "/jobs"),  # read as //evil.example by some browsers
        ("/logout", "/jobs"),
    ],
)
def test_after_login_the_visitor_lands_only_on_this_site(
    desk: Desk, given: str, lands: str
) -> None:
    token = desk.tenant("acme")
    browser = desk.browser()
    form = browser.get("/login", params={"next": given})
    answer = browser.post(
        "/login", data={"csrf": csrf_of(form.text), "token": token, "next": given}
    )
    assert answer.headers["location"] == lands


def test_pages_run_no_script_and_escape_what_tenants_wrote(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    job = desk.job("acme", "<script>alert(1)</script>", group='"><b>g</b>')
    for path in ("/jobs", f"/jobs/{job.id}"):
        answer = browser.get(path)
        assert "<script>alert(1)" not in answer.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in answer.text
        assert "<b>g</b>" not in answer.text
        policy = answer.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script" not in policy
        assert "frame-ancestors 'none'" in policy
        assert answer.headers["cache-control"] == "no-store"
