"""A preview of one customer email with sample data, as `recoup emails preview` prints it and
the dashboard shows it: the same call, so both show the same words."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recoup.messages.formatting import DEFAULT_LOCALE, check_locale
from recoup.messages.kinds import MessageKind
from recoup.messages.rendering import (
    MessageContext,
    RenderedMessage,
    parse_kind,
    render,
    sample_context,
)


@dataclass(frozen=True, kw_only=True)
class Preview:
    tenant: str
    context: MessageContext
    rendered: RenderedMessage

    def as_json(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "event": self.context.kind.value,
            "locale": self.context.locale,
            "timezone": self.context.timezone,
            "subject": self.rendered.subject,
            "text": self.rendered.text,
            "html": self.rendered.html,
        }


def preview(
    tenant: str,
    kind: MessageKind | str,
    *,
    locale: str | None = None,
    templates_dir: Path | None = None,
    final_action: str | None = None,
    sender_name: str | None = None,
    support_email: str | None = None,
    update_url: str | None = None,
    unsubscribe_url: str | None = None,
    allow_unsubscribe: bool = True,
    kind_field: str = "event",
    locale_field: str = "locale",
) -> Preview:
    """The `kind` email of `tenant` with sample data, in `locale` (refused, naming
    `locale_field`, unless babel knows it), from the tenant's `templates_dir` where it has the
    file. The tenant's facts where given (`final_action` its policy's, its sender's name,
    reply address and links); the sample's own otherwise. `allow_unsubscribe=False`: no
    opt-out link, as the tenant's emails go without one."""
    found = parse_kind(kind, field=kind_field)
    chosen = check_locale(locale, field=locale_field) if locale else DEFAULT_LOCALE
    given = {
        "final_action": final_action,
        "update_url": update_url,
        "unsubscribe_url": unsubscribe_url,
    }
    extra: dict[str, Any] = {k: v for k, v in given.items() if v}
    if not allow_unsubscribe:
        extra["unsubscribe_url"] = None
    context = sample_context(
        found,
        tenant_name=tenant,
        sender_name=sender_name,
        support_email=support_email,
        locale=chosen,
        **extra,
    )
    return Preview(
        tenant=tenant, context=context, rendered=render(context, templates_dir=templates_dir)
    )


__all__ = ["Preview", "preview"]
