"""The dashboard's email preview: the customer email of one kind, with sample data, as the
signed-in tenant's customers would read it. The same call as `recoup emails preview --db`
(`recoup.recovery.email_preview`): the tenant's policy's final action, sender, templates and
links, over sample data.

The HTML part is shown in a sandboxed `<iframe srcdoc>`: the email's own markup and inline
styles, with no script, no same-origin access and no way to navigate the dashboard."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from recoup.api.dashboard.web import HtmlRoute, SignedIn, render, text_param
from recoup.api.deps import Api
from recoup.messages.kinds import MessageKind
from recoup.recovery.email_preview import tenant_preview

router = APIRouter(route_class=HtmlRoute, include_in_schema=False)

LOCALES = ("en", "en_GB", "de_DE", "fr_FR", "es_ES", "pt_BR", "ja_JP")  # offered in the form


@router.get("/emails")
def emails_page(
    request: Request,
    visitor: SignedIn,
    api: Api,
    event: str | None = None,
    locale: str | None = None,
) -> Response:
    """One email of the tenant's, previewed: its subject, text part and HTML part."""
    kind = text_param("event", event, max_length=40) or MessageKind.PAYMENT_FAILED.value
    chosen = text_param("locale", locale, max_length=40)
    shown = tenant_preview(api.dunning.store, visitor.tenant, kind, locale=chosen)
    return render(
        request,
        "emails.html",
        {
            "visitor": visitor,
            "nav": "emails",
            "shown": shown,
            "kinds": [k.value for k in MessageKind],
            "locales": LOCALES if chosen in (None, *LOCALES) else (*LOCALES, chosen),
            "reminder": shown.context.kind.is_reminder,
        },
    )
