"""Signing in and out of the dashboard with a tenant's API token.

The token pasted in the login form is checked exactly as a bearer token is
(`recoup.tenancy.authenticate`: active, of this tenant); the session cookie then carries its
hash, signed (`recoup.api.dashboard.sessions`). Cookies are HttpOnly, SameSite=Lax, and Secure
when the page was served over https.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from recoup.api.dashboard.sessions import (
    LOGIN_COOKIE,
    LOGIN_SECONDS,
    SESSION_COOKIE,
    SESSION_SECONDS,
    Sessions,
)
from recoup.api.dashboard.web import (
    Acting,
    CsrfRefused,
    Dash,
    Form,
    HtmlRoute,
    SignedIn,
    render,
    see_other,
)
from recoup.api.deps import Api
from recoup.tenancy import TOKEN_MAX_LENGTH, hash_token

router = APIRouter(route_class=HtmlRoute, include_in_schema=False)

HOME = "/jobs"
MAX_NEXT_LENGTH = 2000


def safe_next(url: str | None) -> str:
    """Where to go after signing in: a path of this site only (never `//host` or a scheme),
    so the login page cannot be used to send a visitor elsewhere."""
    if (
        not url
        or len(url) > MAX_NEXT_LENGTH
        or not url.startswith("/")
        or url.startswith("//")
        or "\\" in url
        or any(ord(c) < 0x20 for c in url)
        or url.startswith(("/login", "/logout"))
    ):
        return HOME
    return url


def _set_cookie(
    response: Response, request: Request, name: str, value: str, *, max_age: int, path: str
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=path,
        httponly=True,  # no script reads it (and the pages run none)
        samesite="lax",  # not sent with another site's POST
        secure=request.url.scheme == "https",
    )


def _login_form(
    request: Request, *, next_url: str, error: str | None = None, status: int = 200
) -> Response:
    token = Sessions.login_token()
    response = render(
        request,
        "login.html",
        {"login_csrf": token, "next": next_url, "error": error},
        status=status,
    )
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="recoup"'
    _set_cookie(response, request, LOGIN_COOKIE, token, max_age=LOGIN_SECONDS, path="/login")
    return response


@router.get("/")
def home(visitor: SignedIn) -> Response:
    return RedirectResponse(HOME, status_code=303)


@router.get("/login")
def login_page(
    request: Request, next_url: Annotated[str | None, Query(alias="next")] = None
) -> Response:
    return _login_form(request, next_url=safe_next(next_url))


@router.post("/login")
def login(request: Request, api: Api, dash: Dash, form: Form) -> Response:
    if not Sessions.login_ok(request.cookies.get(LOGIN_COOKIE), form.get("csrf")):
        raise CsrfRefused()
    next_url = safe_next(form.get("next"))
    token = form.get("token", "").strip()
    tenant = api.services.authenticate(token) if len(token) <= TOKEN_MAX_LENGTH else None
    if tenant is None:
        return _login_form(
            request,
            next_url=next_url,
            error="That is not an active API token. Paste a token made with "
            "`recoup tokens create TENANT`.",
            status=401,
        )
    cookie, _ = dash.sessions.issue(tenant, hash_token(token))
    response = see_other(next_url)
    _set_cookie(response, request, SESSION_COOKIE, cookie, max_age=SESSION_SECONDS, path="/")
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


@router.post("/logout")
def logout(action: Acting) -> Response:
    """Forget the session in this browser. (The cookie is the session: a copy of it stays
    valid until it expires or its token is revoked.)"""
    response = see_other("/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


__all__ = ["HOME", "router", "safe_next"]
