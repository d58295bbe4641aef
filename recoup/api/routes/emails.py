"""GET /v1/dunning/emails/preview: one email of the tenant's as its customers would read it,
with sample data, the same call as `recoup emails preview --db` and the dashboard's /emails
page (`recoup.recovery.email_preview.tenant_preview`: the tenant's policy, sender, templates
and update-card link)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from starlette.responses import Response

from recoup.api.deps import Api, Tenant
from recoup.api.idempotent import json_response
from recoup.api.routes.common import CHECKED, ERRORS, NO_NUL
from recoup.recovery.email_preview import tenant_preview
from recoup.wire.emails import EmailPreviewOut

router = APIRouter(prefix="/v1/dunning", responses=ERRORS, tags=["emails"], dependencies=CHECKED)

Kind = Annotated[
    str,
    Query(
        min_length=1,
        max_length=40,
        pattern=NO_NUL,
        description="payment_failed, retry_failed, final_warning, recovered, exhausted or "
        "card_expiring.",
    ),
]
Locale = Annotated[
    str | None,
    Query(min_length=1, max_length=40, pattern=NO_NUL, description='"fr_FR", "de-DE", …'),
]


@router.get("/emails/preview", response_model=EmailPreviewOut)
def preview_email(tenant: Tenant, api: Api, event: Kind, locale: Locale = None) -> Response:
    """The `event` email of the tenant, in `locale` (default: the templates' own), rendered
    with sample data: its subject, text part and HTML part."""
    shown = tenant_preview(api.dunning.store, tenant, event, locale=locale)
    return json_response(200, EmailPreviewOut.model_validate(shown.as_json()))


__all__ = ["router"]
