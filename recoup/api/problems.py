"""RFC 9457 problem details: the one error shape of the API, and the middleware that ends
every request in it.

Every error leaves as `application/problem+json` with `type`, `title`, `status`, `detail` and
`errors` (one entry per invalid field, naming it). Domain errors (`recoup.errors`) map to their
`http_status` here (`problem_for`); the handlers that answer the framework's own errors are in
`recoup.api.error_handlers`, the wording of validation errors in `recoup.api.validation`. Any
other exception becomes a 500 that says nothing of the internals and is logged with its
traceback on the server side only.

A problem body cannot fail to encode: what it echoes of the request (a value, a field name
made of the client's keys, a detail quoting either) has its lone UTF-16 surrogates replaced
(U+FFFD) and is cut to `ECHO_LIMIT` characters with an ellipsis, by the models themselves, so
every way of building a problem gets it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from http import HTTPStatus

from pydantic import BaseModel, Field, JsonValue, field_validator
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from recoup.api.echoes import ECHO_LIMIT, echo
from recoup.errors import Conflict, InvalidInput, NotFound, RecoupError, StorageError
from recoup.jobs.ssrf import TargetRefused

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "urn:recoup:problem:"  # problem types are URNs: stable names, nothing to fetch

DETAIL_LIMIT = 1000  # characters of a detail, which may quote a value and names the fields

log = logging.getLogger("recoup.api")


class FieldError(BaseModel):
    field: str = Field(
        description="The invalid field, dotted (`target.url`, `retry.max_attempts`)."
    )
    message: str
    value: JsonValue = Field(
        default=None,
        description=f"The value given, when it is a scalar; text cut to {ECHO_LIMIT} characters.",
    )

    @field_validator("field", "message")
    @classmethod
    def _echoable(cls, text: str) -> str:
        return echo(text, DETAIL_LIMIT)

    @field_validator("value")
    @classmethod
    def _echoable_value(cls, value: JsonValue) -> JsonValue:
        return _short(value)


class Problem(BaseModel):
    """An RFC 9457 problem details object."""

    type: str = Field(description="A URI naming the kind of problem, or `about:blank`.")
    title: str
    status: int
    detail: str
    errors: list[FieldError] = Field(default_factory=list)
    rule: str | None = Field(default=None, description="The SSRF rule a refused target broke.")

    @field_validator("detail")
    @classmethod
    def _echoable(cls, text: str) -> str:
        return echo(text, DETAIL_LIMIT)


class ApiProblem(RecoupError):
    """An error answered as problem+json with an exact status (auth, idempotency, limits),
    and its headers: its own handler answers it, never `problem_for`'s rule."""

    def __init__(
        self,
        status: int,
        slug: str,
        detail: str,
        *,
        errors: Sequence[FieldError] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.problem = Problem(
            type=TYPE_BASE + slug,
            title=HTTPStatus(status).phrase,
            status=status,
            detail=detail,
            errors=list(errors),
        )
        self.headers = dict(headers or {})
        self.http_status = status


def problem_response(problem: Problem, headers: Mapping[str, str] | None = None) -> Response:
    body = problem.model_dump(mode="json", exclude_none=True)
    return Response(
        # allow_nan=False: a non-finite float must never leave as NaN (invalid JSON); `_short`
        # keeps them out, and this would fail loudly (a logged 500) rather than emit one.
        # errors="replace": the models have replaced lone surrogates already; should one be
        # missed, it leaves as "?" rather than failing the answer.
        json.dumps(body, ensure_ascii=False, allow_nan=False).encode(errors="replace"),
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=dict(headers or {}),
    )


def _short(value: object) -> JsonValue:
    """The offending value if it is a JSON scalar, text cut by `echo`; otherwise nothing (no
    echo of arrays or objects into error bodies). NaN and ±Infinity, which JSON cannot carry (a
    body with them is invalid JSON), are echoed as their text: "nan", "inf", "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return echo(value)
    return None


def problem_for(exc: RecoupError) -> Problem:
    """The problem a domain error answers with (an `ApiProblem`, the one it carries)."""
    if isinstance(exc, ApiProblem):
        return exc.problem
    status = exc.http_status
    if isinstance(exc, InvalidInput):
        rule = exc.rule if isinstance(exc, TargetRefused) else None
        fields: tuple[str, ...] = getattr(exc, "fields", (exc.field,))
        return Problem(
            type=TYPE_BASE + ("target-refused" if rule else "invalid-input"),
            title=HTTPStatus(status).phrase,
            status=status,
            # Not str(exc), which quotes the whole value (a 5,000-character key, say).
            detail=f"{exc.field}: {echo(repr(exc.value))} is not valid; {exc.allowed}"
            if len(fields) == 1
            else exc.allowed,
            errors=[
                FieldError(field=field, message=exc.allowed, value=_short(exc.value))
                for field in fields
            ],
            rule=rule,
        )
    slug = {NotFound: "not-found", Conflict: "conflict", StorageError: "storage-unavailable"}
    kind = next((s for cls, s in slug.items() if isinstance(exc, cls)), "error")
    if status >= 500:
        # Storage errors carry driver text; the caller gets the kind, the log gets the rest.
        log.error("answered %d: %s", status, exc)
        detail = (
            "the database is unavailable; retry later"
            if isinstance(exc, StorageError)
            else INTERNAL_ERROR.detail
        )
    else:
        detail = str(exc)
    return Problem(
        type=TYPE_BASE + kind, title=HTTPStatus(status).phrase, status=status, detail=detail
    )


INTERNAL_ERROR = Problem(
    type=TYPE_BASE + "internal-error",
    title=HTTPStatus.INTERNAL_SERVER_ERROR.phrase,
    status=500,
    detail="the server failed to answer this request; it has been logged",
)


class CatchAllMiddleware:
    """The last line: an exception no handler took becomes a logged, bare problem 500.

    Starlette's own server-error middleware would answer too, but then re-raise; this one
    ends the exception here, so no traceback can reach a client or a test client.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await problem_response(INTERNAL_ERROR)(scope, receive, send)


class BodyTooLarge(StarletteHTTPException, RecoupError):
    """Raised from `receive` when a streamed body passes the limit. An HTTP exception first,
    so that FastAPI's body reader lets it through and the handler above answers 413."""

    http_status = 413

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over the limit of {limit} bytes")


class BodyLimitMiddleware:
    """Refuse request bodies over `limit` bytes with 413, by Content-Length when given and by
    counting otherwise (a chunked body is cut off as soon as it passes the limit)."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _too_large(self) -> Response:
        return problem_response(
            Problem(
                type=TYPE_BASE + "body-too-large",
                title=HTTPStatus.REQUEST_ENTITY_TOO_LARGE.phrase,
                status=413,
                detail=f"the request body is over the limit of {self.limit} bytes",
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.limit:
                    await self._too_large()(scope, receive, send)
                    return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._too_large()(scope, receive, send)
