"""GET /v1/tenant: whose the bearer token is. A remote `recoup --url` asks it, to print the
tenant's name as the local commands do and to check a `--tenant` given with the token."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from recoup.api.deps import Tenant
from recoup.api.idempotent import json_response
from recoup.api.routes.common import CHECKED, ERRORS
from recoup.wire.schemas.common import TenantOut

router = APIRouter(prefix="/v1", responses=ERRORS, tags=["tenant"], dependencies=CHECKED)


@router.get("/tenant", response_model=TenantOut)
def get_tenant(tenant: Tenant) -> Response:
    """The tenant the token acts for."""
    return json_response(200, TenantOut(id=tenant))


__all__ = ["router"]
