"""Request validation errors as problems whose `detail` reads on its own.

pydantic reports every invalid field at once (FastAPI hands them all over); this module words
each one as "what is wrong, what is allowed, what was given", without pydantic's
"Value error, " prefix, and joins them into the `detail`:

    run_at: expected an RFC 3339 date-time …, got 1700000000; timeout_seconds: expected a
    number ≥ 0.001, got -1

A body that is not JSON says where it fails (line and column); a body that is JSON but not an
object says what it is; a body sent without `Content-Type: application/json` is a 415 naming
the type received, since the body was never read as JSON and no field can be judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from recoup.api.echoes import echo_header, quote
from recoup.api.problems import (
    TYPE_BASE,
    FieldError,
    Problem,
    _short,
)
from recoup.wire import SURROGATE_MESSAGE
from recoup.wire.schemas.common import BETWEEN_FIELDS

# pydantic's error types whose `ctx` bound words the rule.
_BOUNDS = {
    "greater_than_equal": ("ge", "a number ≥ {}"),
    "greater_than": ("gt", "a number > {}"),
    "less_than_equal": ("le", "a number ≤ {}"),
    "less_than": ("lt", "a number < {}"),
    "string_too_short": ("min_length", "at least {} characters"),
    "string_too_long": ("max_length", "at most {} characters"),
    "too_short": ("min_length", "at least {} items"),
    "too_long": ("max_length", "at most {} items"),
}
# pydantic's error types of a value of the wrong JSON type (strict: no "60" for 60).
_TYPES = {
    "float_type": "a number",
    "float_parsing": "a number",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "dict_type": "a JSON object",
    "list_type": "an array",
    "finite_number": "a finite number",
}


def reason(error: Mapping[str, Any]) -> str:
    """What is wrong with one field and what is allowed, in the API's words."""
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    message = str(error.get("msg", ""))
    if kind == "missing":
        loc = tuple(error.get("loc", ()))
        return "expected a JSON object; the body is empty" if loc == ("body",) else "required"
    if kind == "extra_forbidden":
        return "not a field of this body (misspelt?)"
    if kind == "string_unicode":
        # pydantic's own refusal of a lone surrogate (where a field's str reaches its core)
        # says the same as the `Text` validator's where it does not.
        return SURROGATE_MESSAGE
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        if key in ctx:
            return "expected " + words.format(ctx[key])
    if kind in _TYPES:
        return "expected " + _TYPES[kind]
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    if message.startswith("Input should be "):
        return "expected " + message.removeprefix("Input should be ")
    return message


def _field_of(loc: Sequence[int | str]) -> str:
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        where = parts.pop(0)
        if not parts:
            return str(where)
    return ".".join(str(p) for p in parts)


def _where(document: object, position: object) -> str:
    """'line L, column C' of a character offset into the body."""
    if not isinstance(document, str) or not isinstance(position, int):
        return "an unknown position"
    before = document[:position]
    line = before.count("\n") + 1
    column = position - (before.rfind("\n") + 1) + 1
    return f"line {line}, column {column}"


def validation_problem(errors: Sequence[Any], *, body: object = None) -> Problem:
    """The 422 for FastAPI's request validation `errors`; `body` is the text of a body that is
    not valid JSON (to place the fault)."""
    fields: list[FieldError] = []
    parts: list[str] = []
    for error in errors:
        loc = error.get("loc", ())
        kind = error.get("type", "")
        if kind == "json_invalid":
            position = loc[1] if len(loc) > 1 else None
            why = (error.get("ctx") or {}).get("error", "invalid")
            message = f"expected a JSON object; not valid JSON: {why} at {_where(body, position)}"
            fields.append(FieldError(field="body", message=message))
            parts.append(f"body: {message}")
            continue
        field = _field_of(loc)
        message = reason(error)
        given = error.get("input")
        value = None if kind == "missing" else _short(given)
        fields.append(FieldError(field=field, message=message, value=value))
        if kind in ("missing", "extra_forbidden", BETWEEN_FIELDS):
            parts.append(f"{field}: {message}")
        else:
            parts.append(f"{field}: {message}, got {quote(given)}")
    return Problem(
        type=TYPE_BASE + "invalid-input",
        title=HTTPStatus.UNPROCESSABLE_ENTITY.phrase,
        status=422,
        detail="; ".join(parts) or "the request is invalid",
        errors=fields,
    )


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type names JSON (`application/json`, `application/*+json`), as
    FastAPI's body reader decides it."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def unread_body(errors: Sequence[Any], content_type: str | None) -> Problem | None:
    """The 415 for a body FastAPI did not read as JSON (no or another Content-Type), or None
    when the errors are of a JSON body."""
    unread = any(
        tuple(e.get("loc", ())) == ("body",) and isinstance(e.get("input"), bytes) for e in errors
    )
    if not unread or is_json(content_type):
        return None
    received = "none" if not content_type else echo_header(content_type)
    return Problem(
        type=TYPE_BASE + "unsupported-media-type",
        title=HTTPStatus.UNSUPPORTED_MEDIA_TYPE.phrase,
        status=415,
        detail="expected a JSON object as the body, sent with Content-Type: application/json; "
        f"got Content-Type: {received}",
        errors=[
            FieldError(
                field="Content-Type",
                message="expected application/json",
                value=None if not content_type else echo_header(content_type),
            )
        ],
    )


__all__ = ["is_json", "reason", "unread_body", "validation_problem"]
