"""The dashboard and a tenant's life, in-process on both backends: disabling a tenant signs
its sessions out at once and refuses its login; enabling it lets it sign in again; deleting it
leaves its sessions nothing to reach."""

from __future__ import annotations

from recoup.api.dashboard.sessions import SESSION_COOKIE
from recoup.tenancy import delete_tenant
from tests.api.dashboard.desk import START, Desk, csrf_of


def test_disabling_the_tenant_ends_its_sessions_and_refuses_its_login(desk: Desk) -> None:
    token = desk.tenant("acme")
    other = desk.sign_in(desk.tenant("other"))
    browser = desk.sign_in(token)
    assert browser.get("/jobs").status_code == 200

    desk.store.set_tenant_disabled("acme", disabled=True, now=START)
    answer = browser.get("/jobs")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login")
    assert SESSION_COOKIE not in browser.cookies
    fresh = desk.browser()
    form = fresh.get("/login")
    refused = fresh.post("/login", data={"csrf": csrf_of(form.text), "token": token})
    assert refused.status_code == 401 and SESSION_COOKIE not in fresh.cookies
    assert other.get("/jobs").status_code == 200  # the other tenant is untouched

    desk.store.set_tenant_disabled("acme", disabled=False, now=START)
    assert desk.sign_in(token).get("/jobs").status_code == 200


def test_a_deleted_tenants_sessions_reach_nothing(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.job("acme", "nightly")
    desk.store.set_tenant_disabled("acme", disabled=True, now=START)
    assert delete_tenant(desk.store, "acme") is not None
    answer = browser.get("/jobs")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login")
