"""The errors of the Python client (`recoup.client`), from the API's problem details.

    ApiError(RecoupError)
    ├── Unauthorized         401
    ├── NotFoundError        404
    ├── ConflictError        409
    ├── InvalidRequest       400, 415 and the other 4xx
    │   └── Unprocessable    422
    ├── ServerError          5xx, after the retries
    └── TransportFailure     no HTTP answer (timeouts, refused connections), after the retries

The message of each is the status and the problem's `detail`, which says what is wrong with
every invalid field and what is allowed (`422: run_at: expected …, got …`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from recoup.errors import Conflict, NotFound, RecoupError


@dataclass(frozen=True)
class FieldProblem:
    field: str
    message: str
    value: Any = None


class ApiError(RecoupError):
    """An error answer of the API (or no answer at all: `status` is then None)."""

    def __init__(
        self,
        status: int | None,
        detail: str,
        *,
        type: str = "about:blank",
        title: str = "",
        errors: list[FieldProblem] | None = None,
        problem: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(_message(status, detail, errors or []))
        self.status = status
        self.detail = detail
        self.type = type
        self.title = title
        self.errors = errors or []
        self.problem = dict(problem or {})

    @property
    def fields(self) -> list[str]:
        return [e.field for e in self.errors]


class Unauthorized(ApiError):
    http_status = 401


class NotFoundError(ApiError, NotFound):
    """404 from the server: also a `recoup.errors.NotFound`, so code written against the
    in-process API catches it unchanged."""

    http_status = 404


class ConflictError(ApiError, Conflict):
    """409 from the server: also a `recoup.errors.Conflict`."""

    http_status = 409


class InvalidRequest(ApiError):
    http_status = 400


class Unprocessable(InvalidRequest):
    http_status = 422


class ServerError(ApiError):
    http_status = 500


class TransportFailure(ApiError):
    http_status = 503


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    404: NotFoundError,
    409: ConflictError,
    422: Unprocessable,
}


def _message(status: int | None, detail: str, errors: list[FieldProblem]) -> str:
    """The exception's text: the status and the problem's detail, which names every invalid
    field and why; a field the detail does not mention (a server from before details said
    why) is added with its message, so the reason is never only in `errors`."""
    reasons = ((e.field, e.message.removeprefix("Value error, ")) for e in errors)
    unsaid = [f"{name}: {why}" for name, why in reasons if f"{name}: {why}" not in detail]
    text = "; ".join([detail, *unsaid])
    return f"{status}: {text}" if status else text


def error_of(response: httpx.Response) -> ApiError:
    """The `ApiError` of an error answer, from its problem details when it has them."""
    problem: dict[str, Any] = {}
    try:
        parsed = response.json()
        if isinstance(parsed, dict):
            problem = parsed
    except ValueError:
        pass
    status = response.status_code
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else InvalidRequest)
    errors = [
        FieldProblem(str(e.get("field", "")), str(e.get("message", "")), e.get("value"))
        for e in problem.get("errors") or []
        if isinstance(e, dict)
    ]
    return cls(
        status,
        str(problem.get("detail") or response.reason_phrase or "error"),
        type=str(problem.get("type", "about:blank")),
        title=str(problem.get("title", "")),
        errors=errors,
        problem=problem,
    )


__all__ = [
    "ApiError",
    "ConflictError",
    "FieldProblem",
    "InvalidRequest",
    "NotFoundError",
    "ServerError",
    "TransportFailure",
    "Unauthorized",
    "Unprocessable",
    "error_of",
]
