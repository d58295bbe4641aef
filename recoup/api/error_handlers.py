"""The handlers that turn every error of the app into problem+json (`recoup.api.problems`).

Domain errors map to their status; request validation errors become one 422 naming every
field (`recoup.api.validation`), or a 415 for a body not sent as JSON; the framework's own
answers (no such route, a method the route does not serve, a body the JSON parser gave up
on) take the same shape: a `urn:recoup:problem:` type and a detail that names the path, the
method and, for 405, the methods allowed, as the `Allow` header lists them.
"""

from __future__ import annotations

from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Scope

from recoup.api.echoes import echo_text
from recoup.api.problems import (
    TYPE_BASE,
    ApiProblem,
    BodyTooLarge,
    Problem,
    problem_for,
    problem_response,
)
from recoup.api.validation import unread_body, validation_problem
from recoup.errors import RecoupError

_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")  # OPTIONS: answered by `on_http`


def served_methods(app: FastAPI, scope: Scope) -> list[str]:
    """The methods some route of `app` serves at the path of `scope`, then OPTIONS."""
    served = [
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] == Match.FULL for route in app.routes)
    ]
    return [*served, "OPTIONS"]


def _framework_problem(request: Request, exc: StarletteHTTPException) -> Problem:
    """The problem of one of Starlette's or FastAPI's own HTTP errors."""
    status = exc.status_code
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    path = echo_text(request.url.path)
    method = echo_text(request.method, 16)
    if isinstance(exc, BodyTooLarge):
        # A chunked body cut off by `BodyLimitMiddleware`: the same problem type as a body
        # refused by its Content-Length.
        kind, detail = "body-too-large", str(exc.detail)
    elif status == 404:
        kind = "not-found"
        detail = f"no route at {path}; the API's routes are listed at /openapi.json"
    elif status == 405:
        allowed = ", ".join(served_methods(request.app, request.scope))
        kind = "method-not-allowed"
        detail = f"{method} is not allowed on {path}; allowed: {allowed}"
    elif status == 400 and isinstance(exc.__cause__, RecursionError):
        kind = "malformed-body"
        detail = "expected a JSON object; the body is nested deeper than the JSON parser allows"
    elif status == 400 and exc.detail == "There was an error parsing the body":
        kind, detail = "malformed-body", "expected a JSON object; the body could not be read"
    else:
        kind = phrase.lower().replace(" ", "-").replace("'", "") or "error"
        detail = exc.detail if isinstance(exc.detail, str) else phrase
    return Problem(type=TYPE_BASE + kind, title=phrase, status=status, detail=detail)


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into problem+json."""

    async def on_api_problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiProblem)
        return problem_response(exc.problem, exc.headers)

    async def on_recoup_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RecoupError)
        return problem_response(problem_for(exc))

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        unsupported = unread_body(errors, request.headers.get("content-type"))
        if unsupported is not None:
            # RFC 9110 §15.5.16: 415 for a content type the resource does not take.
            headers = {"Accept-Post": "application/json"} if request.method == "POST" else {}
            return problem_response(unsupported, headers)
        return problem_response(validation_problem(errors, body=exc.body))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        headers = exc.headers
        if exc.status_code == 405:
            # Starlette's Allow names only the first route on the path; RFC 9110 asks for
            # every method the resource serves, which OPTIONS answers too (204, no body).
            allow = {"Allow": ", ".join(served_methods(request.app, request.scope))}
            if request.method == "OPTIONS":
                return Response(status_code=204, headers=allow)
            headers = {**(headers or {}), **allow}
        return problem_response(_framework_problem(request, exc), headers)

    app.add_exception_handler(ApiProblem, on_api_problem)
    app.add_exception_handler(RecoupError, on_recoup_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)


__all__ = ["install", "served_methods"]
