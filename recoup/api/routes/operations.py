"""The operations routes: /healthz (the process), /readyz (the database), /metrics."""

from __future__ import annotations

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

from recoup.api.deps import Api
from recoup.api.problems import Problem
from recoup.api.schemas import Health

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
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text."}},
)
def metrics_endpoint(api: Api) -> Response:
    return Response(generate_latest(api.metrics.registry), media_type=CONTENT_TYPE_LATEST)


__all__ = ["router"]
