"""Signing in and out of the dashboard with a tenant's API token.

The token pasted in the login form is checked exactly as a bearer token is
(`recoup.tenancy.authenticate`: active, of this tenant); the session cookie then carries its
hash, signed (`recoup.api.dashboard.sessions`). Cookies are HttpOnly, SameSite=Lax, and Secure
when the page was served over https, where their names carry the `__Host-` prefix (the login
form's cookie then has the path `/`, as the prefix requires). Failed logins are throttled per
address and across addresses (`throttle.py`); a logout ends the session on the server.
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from recoup.api.dashboard.sessions import (
    LOGIN_COOKIE,
    LOGIN_SECONDS,
    SESSION_COOKIE,
    SESSION_SECONDS,
    Sessions,
    cookie_name,
)
from recoup.api.dashboard.web import (
    Acting,
    CsrfRefused,
    Dash,
    Form,
    HtmlRoute,
    SignedIn,
    is_https,
    render,
    see_other,
    session_cookie,
)
from recoup.api.deps import Api
from recoup.tenancy import TOKEN_MAX_LENGTH, hash_token, token_name

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
    response: Response, request: Request, base: str, value: str, *, max_age: int, path: str
) -> None:
    https = is_https(request)
    response.set_cookie(
        cookie_name(base, https=https),
        value,
        max_age=max_age,
        path="/" if https else path,  # `__Host-` cookies must be for the path `/`
        httponly=True,  # no script reads it (and the pages run none)
        samesite="lax",  # not sent with another site's POST
        secure=https,
    )


def _login_cookie(request: Request) -> tuple[str, str]:
    """The login form's cookie: its name and path for this request."""
    https = is_https(request)
    return cookie_name(LOGIN_COOKIE, https=https), "/" if https else "/login"


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def _login_form(
    request: Request,
    *,
    next_url: str,
    error: str | None = None,
    status: int = 200,
    retry_after: float | None = None,
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
    if retry_after is not None:
        response.headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
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
    login_cookie, _ = _login_cookie(request)
    if not Sessions.login_ok(request.cookies.get(login_cookie), form.get("csrf")):
        raise CsrfRefused()
    next_url = safe_next(form.get("next"))
    address = client_address(request)
    wait = dash.throttle.wait(address)
    if wait > 0:  # before the token is looked up: a guess made now learns nothing
        return _login_form(
            request,
            next_url=next_url,
            error="Too many failed sign-ins: wait a few minutes, then try again.",
            status=429,
            retry_after=wait,
        )
    token = form.get("token", "").strip()
    tenant = api.services.authenticate(token) if len(token) <= TOKEN_MAX_LENGTH else None
    if tenant is None:
        dash.throttle.failed(address)
        return _login_form(
            request,
            next_url=next_url,
            error="That is not an active API token. Paste a token made with "
            "`recoup tokens create TENANT`.",
            status=401,
        )
    dash.throttle.succeeded(address)
    who = token_name(api.services.tables.list_tokens(tenant), token)
    cookie, _ = dash.sessions.issue(tenant, hash_token(token), who=who)
    response = see_other(next_url)
    _set_cookie(response, request, SESSION_COOKIE, cookie, max_age=SESSION_SECONDS, path="/")
    name, path = _login_cookie(request)
    response.delete_cookie(name, path=path, secure=is_https(request))
    return response


@router.post("/logout")
def logout(request: Request, api: Api, action: Acting) -> Response:
    """End the session: on the server (a copy of its cookie no longer works) and in this
    browser."""
    session = action.visitor.session
    api.services.tables.end_session(session.nonce, expires=session.expires)
    response = see_other("/login")
    response.delete_cookie(session_cookie(request), path="/", secure=is_https(request))
    return response


__all__ = ["HOME", "router", "safe_next", "token_name"]
