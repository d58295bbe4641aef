"""The operations routes: /healthz (the process), /readyz (the database), /metrics (behind the
operator's metrics token, or for loopback clients only when there is none: job counts and
request rates are not for the public)."""

from __future__ import annotations

import hmac
import ipaddress

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

from recoup.api.deps import Api
from recoup.api.problems import ApiProblem, Problem
from recoup.wire.schemas import Health

router = APIRouter(tags=["operations"])  # unauthenticated: probes and scrapers carry no token


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    """The process answers."""
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    responses={503: {"model": Problem, "description": "The database is unreachable."}},
)
def readyz(api: Api) -> Health:
    """The database answers."""
    api.services.ping()
    return Health(status="ok")


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "Prometheus text."},
        401: {"model": Problem, "description": "The metrics token is missing or wrong."},
        403: {"model": Problem, "description": "No metrics token is set: loopback only."},
    },
)
def metrics_endpoint(api: Api, request: Request) -> Response:
    """Prometheus metrics. With `recoup serve --metrics-token` (RECOUP_METRICS_TOKEN), for
    `Authorization: Bearer <token>`; without one, for loopback clients only."""
    token = api.settings.metrics_token
    if token is not None:
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            raise ApiProblem(
                401,
                "unauthorized",
                "/metrics wants Authorization: Bearer <the server's metrics token>",
                headers={"WWW-Authenticate": "Bearer"},
            )
    elif not _loopback(request.client.host if request.client else ""):
        raise ApiProblem(
            403,
            "metrics-forbidden",
            "/metrics answers loopback clients only unless the server has a metrics token "
            "(recoup serve --metrics-token, or RECOUP_METRICS_TOKEN)",
        )
    return Response(generate_latest(api.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["router"]
