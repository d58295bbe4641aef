"""Refuse query parameters an operation does not declare: `?name=x` on an operation without a
`name` filter is a 400 naming it, not a silent listing of everything.

One dependency (`refuse_unknown_query`) that a router lists in its `dependencies`; it reads
the parameters the matched route declares (its own and its dependencies', as /openapi.json
states them), so no route repeats its list.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from recoup.api.problems import ApiProblem, FieldError


def declared_query(dependant: Dependant) -> set[str]:
    """The query parameter names (aliases, as a client spells them) of `dependant` and of
    every dependency below it."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= declared_query(sub)
    return names


def refuse_unknown_query(request: Request) -> None:
    """`ApiProblem` 400 naming every query parameter the matched operation does not declare,
    with the ones it does."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return  # not a FastAPI operation (a mount): nothing declared to compare with
    allowed = declared_query(route.dependant)
    unknown = sorted(set(request.query_params) - allowed)
    if not unknown:
        return
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


__all__ = ["declared_query", "refuse_unknown_query"]
