"""What every dashboard page shares: its state on the app, the signed-in visitor, form bodies
checked for their CSRF token, the route class that turns errors into pages, and rendering.

Pages are HTML, never problem+json: `HtmlRoute` answers a missing or stale session with a
redirect to the login page, a refused CSRF token with 403, an id the tenant does not have with
404 (another tenant's id included, as in the API), and invalid input with 422 naming the field,
the value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, TypeVar
from urllib.parse import parse_qsl, urlencode

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from starlette.responses import RedirectResponse, Response

from recoup.api.dashboard.sessions import SESSION_COOKIE, Session, Sessions, cookie_name
from recoup.api.dashboard.throttle import LoginThrottle
from recoup.api.deps import Api
from recoup.api.echoes import echo
from recoup.errors import InvalidInput, NotFound, RecoupError

E = TypeVar("E", bound=StrEnum)

MAX_FORM_FIELDS = 20
FORM_MEDIA_TYPE = "application/x-www-form-urlencoded"

# No script at all; styles from our sheet, plus inline ones because matplotlib's SVG charts
# carry `style` attributes and a <style> element of their own.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",  # a tenant's data stays out of shared caches
}


@dataclass(frozen=True)
class DashboardState:
    """Set on `app.state.dashboard` by `recoup.api.dashboard.mount`."""

    sessions: Sessions
    templates: Jinja2Templates
    throttle: LoginThrottle = field(default_factory=LoginThrottle)


def is_https(request: Request) -> bool:
    return request.url.scheme == "https"


def session_cookie(request: Request) -> str:
    """The session cookie's name for this request (`__Host-` over HTTPS)."""
    return cookie_name(SESSION_COOKIE, https=is_https(request))


def dashboard_state(request: Request) -> DashboardState:
    state = request.app.state.dashboard
    assert isinstance(state, DashboardState), "mount() sets app.state.dashboard"
    return state


Dash = Annotated[DashboardState, Depends(dashboard_state)]


class LoginRequired(RecoupError):
    """No valid session: the visitor goes to the login page, then back to `next_url`."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


class CsrfRefused(RecoupError):
    """A POST without this session's CSRF token (or the login form's)."""


@dataclass(frozen=True, kw_only=True)
class Visitor:
    """A signed-in browser: every query of its pages is scoped to `tenant`."""

    tenant: str
    csrf: str
    session: Session

    @property
    def who(self) -> str:
        """Who acts: the token that signed in, as the run log names it."""
        return self.session.who or f"dashboard:tenant={self.tenant}"


def signed_in(request: Request, api: Api, dash: Dash) -> Visitor:
    """The visitor of a valid session whose token is still active and whose tenant is not
    disabled, and which no logout ended; `LoginRequired` otherwise. All are checked on every
    request, so revoking the token, disabling (or deleting) the tenant or logging out ends the
    session at once."""
    session = dash.sessions.read(request.cookies.get(session_cookie(request)))
    tables = api.services.tables
    owner = None if session is None else tables.token_owner(session.token_hash)
    if (
        session is None
        or owner is None
        or owner.disabled
        or owner.tenant != session.tenant
        or tables.session_ended(session.nonce)
    ):
        query = f"?{request.url.query}" if request.url.query else ""
        raise LoginRequired(request.url.path + query if request.method == "GET" else "/")
    return Visitor(tenant=session.tenant, csrf=dash.sessions.csrf_token(session), session=session)


SignedIn = Annotated[Visitor, Depends(signed_in)]


async def form_fields(request: Request) -> dict[str, str]:
    """The fields of a URL-encoded form body (the last value of a repeated name)."""
    body = await request.body()
    if not body:
        return {}  # no field, no CSRF token: refused as such
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != FORM_MEDIA_TYPE:
        raise InvalidInput("content-type", media_type or None, f"expected {FORM_MEDIA_TYPE}")
    try:
        text = body.decode()
        return dict(parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS))
    except UnicodeDecodeError:
        raise InvalidInput("body", None, "expected UTF-8 form fields") from None
    except ValueError:
        raise InvalidInput("body", None, f"expected at most {MAX_FORM_FIELDS} fields") from None


Form = Annotated[dict[str, str], Depends(form_fields)]


@dataclass(frozen=True, kw_only=True)
class Action:
    """A POST of a signed-in visitor whose form carried the session's CSRF token."""

    visitor: Visitor
    form: dict[str, str]

    @property
    def tenant(self) -> str:
        return self.visitor.tenant


def acting(visitor: SignedIn, form: Form, dash: Dash) -> Action:
    if not dash.sessions.csrf_ok(visitor.session, form.get("csrf")):
        raise CsrfRefused()
    return Action(visitor=visitor, form=form)


Acting = Annotated[Action, Depends(acting)]


def text_param(field: str, value: str | None, *, max_length: int = 200) -> str | None:
    """A search field: None when left empty; `InvalidInput` when no store could match it."""
    value = (value or "").strip()
    if not value:
        return None
    if len(value) > max_length or "\x00" in value:
        raise InvalidInput(field, value, f"expected 1–{max_length} characters, no NUL")
    return value


def choice_param(field: str, value: str | None, choices: type[E]) -> E | None:
    """One of an enum's values, or None when left empty."""
    if not value:
        return None
    try:
        return choices(value)
    except ValueError:
        allowed = ", ".join(c.value for c in choices)
        raise InvalidInput(field, value, f"expected one of {allowed}") from None


def render(
    request: Request, template: str, context: dict[str, Any], *, status: int = 200
) -> Response:
    response = dashboard_state(request).templates.TemplateResponse(
        request, template, context, status_code=status
    )
    response.headers.update(SECURITY_HEADERS)
    return response


def see_other(path: str, **params: str) -> RedirectResponse:
    """303 after a POST: the browser GETs the page, and a reload does not post again."""
    query = urlencode({k: v for k, v in params.items() if v})
    return RedirectResponse(f"{path}?{query}" if query else path, status_code=303)


def error_page(request: Request, status: int, title: str, detail: str) -> Response:
    return render(request, "error.html", {"title": title, "detail": detail}, status=status)


class HtmlRoute(APIRoute):
    """A dashboard route: the errors of the handler and of its dependencies become pages."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired as exc:
                response: Response = RedirectResponse(
                    "/login?" + urlencode({"next": exc.next_url}), status_code=303
                )
                name = session_cookie(request)
                if name in request.cookies:  # stale or altered: forget it
                    response.delete_cookie(name, path="/", secure=is_https(request))
                return response
            except CsrfRefused:
                return error_page(
                    request,
                    403,
                    "Forbidden",
                    "The form's CSRF token is missing or wrong; reload the page and try again.",
                )
            except NotFound:
                return error_page(request, 404, "Not found", "Nothing with that id here.")
            except InvalidInput as exc:
                value = "" if exc.value is None else f" {echo(repr(exc.value))}"
                return error_page(
                    request, 422, "Invalid input", f"{exc.field}{value}: {exc.allowed}"
                )
            except RequestValidationError as exc:
                fields = ", ".join(".".join(map(str, e["loc"][1:])) for e in exc.errors())
                return error_page(request, 422, "Invalid input", f"invalid: {fields}")

        return route


__all__ = [
    "SECURITY_HEADERS",
    "Acting",
    "Action",
    "CsrfRefused",
    "Dash",
    "DashboardState",
    "Form",
    "HtmlRoute",
    "LoginRequired",
    "SignedIn",
    "Visitor",
    "choice_param",
    "dashboard_state",
    "error_page",
    "is_https",
    "render",
    "see_other",
    "session_cookie",
    "text_param",
]
