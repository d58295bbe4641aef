"""A tenant's email, previewed as its customers would get it: its policy's final action, its
sender's name, reply address and templates directory, its update-card link (with a sample
token) and its opt-out setting, over sample data. `recoup emails preview --db` and the
dashboard's /emails page both show this, so the preview is the email `recovery.emails` sends
but for the customer's facts."""

from __future__ import annotations

from email.utils import parseaddr
from pathlib import Path
from typing import Protocol

from recoup.jobs.model import Tenant
from recoup.messages.kinds import MessageKind
from recoup.messages.preview import Preview, preview
from recoup.recovery.email_store import MessageStore
from recoup.recovery.policies import policy_from_text
from recoup.recovery.store import DunningSettings

SAMPLE_TOKEN = "SAMPLE-TOKEN"  # stands for the signed token of a real email


class PreviewStore(Protocol):
    def get_settings(self, tenant: str) -> DunningSettings | None: ...

    def get_tenant(self, tenant_id: str) -> Tenant | None: ...

    @property
    def messages(self) -> MessageStore: ...


def tenant_preview(
    store: PreviewStore,
    tenant: str,
    kind: MessageKind | str,
    *,
    locale: str | None = None,
    templates_dir: Path | None = None,
    kind_field: str = "event",
    locale_field: str = "locale",
) -> Preview:
    """The `kind` email of `tenant` as its settings make it; `templates_dir`, when given,
    replaces the tenant's own (to try a directory before configuring it)."""
    dunning = store.get_settings(tenant)
    policy = policy_from_text(dunning.policy_toml if dunning is not None else None)
    email = store.messages.get_message_settings(tenant)
    found = store.get_tenant(tenant)
    name = found.name if found is not None else tenant
    sender_name, support, update_url, unsubscribe = None, None, None, None
    if email is not None:
        sender_name = parseaddr(email.email_from or "")[0] or None
        support = email.reply_to
        if templates_dir is None and email.templates_dir:
            templates_dir = Path(email.templates_dir)
        if email.update_card_url:
            update_url = email.update_card_url.replace("{token}", SAMPLE_TOKEN)
            if email.allow_unsubscribe:  # as `recovery.emails` builds the opt-out link
                unsubscribe = update_url + ("&" if "?" in update_url else "?") + "unsubscribe=1"
    return preview(
        name,
        kind,
        locale=locale,
        templates_dir=templates_dir,
        final_action=policy.final_action.value,
        sender_name=sender_name,
        support_email=support,
        update_url=update_url,
        unsubscribe_url=unsubscribe,
        allow_unsubscribe=email is not None and email.allow_unsubscribe,
        kind_field=kind_field,
        locale_field=locale_field,
    )


__all__ = ["SAMPLE_TOKEN", "PreviewStore", "tenant_preview"]
