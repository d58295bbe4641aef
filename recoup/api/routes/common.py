"""What the /v1 routers share: the documented error responses and the parameter types."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Query

from recoup.api.deps import known_query
from recoup.api.problems import PROBLEM_MEDIA_TYPE
from recoup.jobs.schedules.occurrences import MAX_SCHEDULE_NAME
from recoup.jobs.store import MAX_PAGE
from recoup.wire.schemas.patterns import CURSOR, NO_NUL, RUN_CURSOR

MAX_ID_LENGTH = 100


# The documented problem+json answer of a status, by reference to the `Problem` schema that
# the routes naming `Problem` as their model (the health and metrics probes, among others) put
# in the document's components. Not `{"model": Problem}`: FastAPI builds a serializer for each
# route and status of each app it serves, ~100 ms of CPU at an app's first requests for the
# ~650 error answers of the /v1 routes, to write the same schema into the document.
PROBLEM_SCHEMA = {"$ref": "#/components/schemas/Problem"}


def problem_response(description: str) -> dict[str, Any]:
    """An error answer of the OpenAPI document: `description`, with a problem+json body."""
    return {"description": description, "content": {PROBLEM_MEDIA_TYPE: {"schema": PROBLEM_SCHEMA}}}


def _error_responses() -> dict[int | str, dict[str, Any]]:
    reasons = {
        400: "An unknown query parameter (each named), a malformed Idempotency-Key, or a "
        "JSON body nested deeper than the parser allows.",
        401: "Missing, unknown or revoked bearer token (or its tenant deleted).",
        403: "The token's tenant is disabled.",
        404: "No such resource for this tenant.",
        409: "A live job or schedule holds that name, or the Idempotency-Key is in flight.",
        413: "The body is over the size limit.",
        415: "The body was not sent with `Content-Type: application/json`.",
        422: "Invalid input (every field named, with what is allowed), a `run_at` in the past "
        "without `allow_past`, a refused target, or a reused key.",
        429: "The tenant is over its rate limit; Retry-After says when to try again.",
        500: "An unexpected error; logged, nothing of it disclosed.",
        503: "The database is unavailable.",
    }
    return {code: problem_response(text) for code, text in reasons.items()}


ERRORS = _error_responses()  # every /v1 operation may answer these (problem+json)
# What every /v1 router lists in its `dependencies`: an undeclared query parameter is a 400.
CHECKED = [Depends(known_query)]


def link(method: str, path: str, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link from a response to the operation `method path`, its parameters taken
    from the response by runtime expressions (`job_id="$response.body#/id"`): what a client,
    or schemathesis' stateful phase, can call next with what it just got."""
    pointer = path.replace("~", "~0").replace("/", "~1")
    return {"operationRef": f"#/paths/{pointer}/{method.lower()}", "parameters": parameters}


Id = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH, pattern=NO_NUL)]
# A page of a list: the stores' bound (`MAX_PAGE`), so a valid request is never refused below.
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Cursor = Annotated[
    str | None,
    Query(
        max_length=500,
        pattern=CURSOR,
        description="`next_cursor` of the previous page (`{microseconds}:{id}`).",
    ),
]
RunCursor = Annotated[
    str | None,
    Query(
        max_length=9,
        pattern=RUN_CURSOR,
        description="`next_cursor` of the previous page (the last attempt it held).",
    ),
]
ScheduleCursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_SCHEDULE_NAME,
        pattern=NO_NUL,
        description="`next_cursor` of the previous page (the last name it held).",
    ),
]
# An exact name to filter on (jobs' names go up to 200 characters, schedules' to 150).
ExactName = Annotated[str | None, Query(min_length=1, max_length=200, pattern=NO_NUL)]

__all__ = [
    "CHECKED",
    "ERRORS",
    "MAX_ID_LENGTH",
    "NO_NUL",
    "Cursor",
    "ExactName",
    "Id",
    "Limit",
    "RunCursor",
    "ScheduleCursor",
    "link",
]
