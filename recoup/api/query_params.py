"""Refuse query parameters an operation does not declare: `?name=x` on an operation without a
`name` filter is a 400 naming it, not a silent listing of everything.

One dependency (`refuse_unknown_query`) that a router lists in its `dependencies`; it reads
the parameters the matched route declares (its own and its dependencies', as /openapi.json
states them), so no route repeats its list.

A family of parameters (`metadata[key]=value`: a deep object, whose names are not known in
advance) is declared by a dependency that is a `QueryFamily`: it reads every `name[…]` of the
request, and the check lets them through on the operations that depend on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from recoup.api.problems import ApiProblem, FieldError


class QueryFamily:
    """A dependency reading the query parameters `{name}[key]=value` into a dict (None when
    there are none), for an operation that states them as one deep-object parameter
    (`openapi`). A key given twice → 400 naming it."""

    def __init__(
        self, name: str, *, description: str, schema: Mapping[str, Any] | None = None
    ) -> None:
        self.name = name
        self.description = description
        # The object's schema as the document states it (names and values the check takes).
        self.schema = schema or {"type": "object", "additionalProperties": {"type": "string"}}
        self._pattern = re.compile(re.escape(name) + r"\[([^\[\]]*)\]")

    def member(self, parameter: str) -> str | None:
        """The key of `parameter` if it is of this family (`name[key]`), else None."""
        found = self._pattern.fullmatch(parameter)
        return None if found is None else found.group(1)

    def __call__(self, request: Request) -> dict[str, str] | None:
        pairs: dict[str, str] = {}
        for parameter, value in request.query_params.multi_items():
            key = self.member(parameter)
            if key is None:
                continue
            if key in pairs:
                raise ApiProblem(
                    400,
                    "invalid-query-parameter",
                    f"query parameter {parameter} is given twice; give each key once",
                    errors=[FieldError(field=parameter, message="given twice", value=value)],
                )
            pairs[key] = value
        return pairs or None

    def openapi(self) -> Mapping[str, Any]:
        """The parameter as /openapi.json states it: a deep object of string values."""
        return {
            "name": self.name,
            "in": "query",
            "required": False,
            "style": "deepObject",
            "explode": True,
            "description": self.description,
            "schema": dict(self.schema),
        }


def declared_query(dependant: Dependant) -> set[str]:
    """The query parameter names (aliases, as a client spells them) of `dependant` and of
    every dependency below it."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= declared_query(sub)
    return names


def declared_families(dependant: Dependant) -> list[QueryFamily]:
    """The `QueryFamily` dependencies of `dependant` and below."""
    found = [dependant.call] if isinstance(dependant.call, QueryFamily) else []
    for sub in dependant.dependencies:
        found += declared_families(sub)
    return found


def refuse_unknown_query(request: Request) -> None:
    """`ApiProblem` 400 naming every query parameter the matched operation does not declare,
    with the ones it does."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return  # not a FastAPI operation (a mount): nothing declared to compare with
    allowed = declared_query(route.dependant)
    families = declared_families(route.dependant)
    unknown = sorted(
        name
        for name in set(request.query_params) - allowed
        if not any(family.member(name) is not None for family in families)
    )
    if not unknown:
        return
    allowed |= {f"{family.name}[…]" for family in families}
    accepts = ", ".join(sorted(allowed)) if allowed else "none"
    message = f"not a query parameter of this operation; it accepts: {accepts}"
    raise ApiProblem(
        400,
        "unknown-query-parameter",
        f"unknown query parameter{'s' if len(unknown) > 1 else ''} "
        f"{', '.join(unknown)}; {request.method} {route.path} accepts: {accepts}",
        errors=[
            FieldError(field=name, message=message, value=request.query_params[name])
            for name in unknown
        ],
    )


__all__ = ["QueryFamily", "declared_families", "declared_query", "refuse_unknown_query"]
