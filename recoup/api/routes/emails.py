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
from recoup.api.routes.common import CHECKED, ERRORS
from recoup.messages.kinds import MessageKind
from recoup.recovery.contacts import LOCALE_PATTERN
from recoup.recovery.email_preview import tenant_preview
from recoup.wire.emails import EmailPreviewOut

router = APIRouter(prefix="/v1/dunning", responses=ERRORS, tags=["emails"], dependencies=CHECKED)

# The kinds as an enum in the schema: a client (and the fuzz test) learns the allowed values
# from the document, and the problem+json names them when one is wrong.
Kind = Annotated[MessageKind, Query(description="Which email: one of the kinds.")]
Locale = Annotated[
    str | None,
    Query(
        min_length=2,
        max_length=35,
        pattern=LOCALE_PATTERN,
        description='A locale babel knows, BCP 47 or babel style: "fr_FR", "de-DE", …',
    ),
]


@router.get("/emails/preview", response_model=EmailPreviewOut)
def preview_email(tenant: Tenant, api: Api, event: Kind, locale: Locale = None) -> Response:
    """The `event` email of the tenant, in `locale` (default: the templates' own), rendered
    with sample data: its subject, text part and HTML part."""
    shown = tenant_preview(api.dunning.store, tenant, event, locale=locale)
    return json_response(200, EmailPreviewOut.model_validate(shown.as_json()))


__all__ = ["router"]
