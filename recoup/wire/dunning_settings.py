"""Request and response models of /v1/dunning/settings: a tenant's dunning policy, URLs,
experiment, hosted charging and Stripe intake (strict, as in `schemas`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from recoup.recovery.email_settings import (
    ADDRESS_PATTERN,
    SMTP_URL_PATTERN,
    UPDATE_CARD_URL_PATTERN,
)
from recoup.recovery.email_store import MessageSettings
from recoup.recovery.intake_store import DEFAULT_TIMEZONE, IntakeSettings
from recoup.recovery.store import DunningSettings
from recoup.wire.schemas.codes import TimeZone
from recoup.wire.schemas.common import (
    Number,
    OutboundUrl,
    PolicyToml,
    StrictModel,
    Text,
)
from recoup.wire.schemas.stated import Stated, one_of

# Characters of a policy's TOML: two texts this long (a policy and an experiment's) fit the
# body limit (256 KiB) however a client encodes them (12 bytes for a character escaped as a
# surrogate pair), with both URLs and the experiment's name.
MAX_POLICY_LENGTH = 8 * 1024
# As `recoup.recovery.intake_store` checks it (stated here; that check never quotes a secret).
STRIPE_SECRET = "^whsec_[!-~]{8,250}$"
STRIPE_API_KEY = "^(sk|rk)_(test|live)_[0-9A-Za-z]{8,250}$"


class SettingsIn(StrictModel):
    """A tenant's settings. The three experiment fields go together, or none."""

    model_config = ConfigDict(
        json_schema_extra=one_of(
            {"experiment_name": "null", "experiment_policy": "null", "experiment_share": "null"},
            {
                "experiment_name": "string",
                "experiment_policy": "string",
                "experiment_share": "number",
            },
        )
    )

    policy: PolicyToml | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_POLICY_LENGTH,
        description=(
            "A dunning policy as TOML text, in the format of the shipped presets "
            "(recoup/dunning/data/policies); null: the business-days preset."
        ),
    )
    event_url: OutboundUrl | None = Field(default=None, min_length=1, max_length=2048)
    charge_url: OutboundUrl | None = Field(default=None, min_length=1, max_length=2048)
    experiment_name: Text | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="A policy experiment: its name (the split is a hash of tenant, invoice id "
        "and this name). The three experiment fields go together, or none.",
    )
    experiment_policy: PolicyToml | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_POLICY_LENGTH,
        description="The experiment's second policy (arm b) as TOML text; `policy` is arm a. "
        "Its name must differ from arm a's.",
    )
    experiment_share: Number | None = Field(
        default=None, gt=0, lt=1, description="The share of new invoices planned with arm b."
    )
    # Checked by the intake settings, which never quote it in an error.
    stripe_webhook_secret: Annotated[str, Stated(pattern=STRIPE_SECRET)] | None = Field(
        default=None,
        description="The Stripe endpoint's signing secret (`whsec_…`) that verifies webhooks "
        "at /v1/intake/stripe/{tenant}. Write-only: never shown again. Left out: kept (unlike "
        "the other fields); null: removed.",
    )
    default_timezone: TimeZone | None = Field(
        default=None,
        description="The IANA zone of customers whose Stripe events name none; null: UTC.",
    )
    charge_with: Literal["url", "stripe"] | None = Field(
        default=None,
        description="Where attempts are charged: `url` (the charge endpoint, `charge_url`) or "
        "`stripe` (Recoup pays the Stripe invoice itself with `stripe_api_key`). Left out: "
        "kept (unlike the other fields); `url` removes the stored key.",
    )
    # Checked by the hosted-charging settings, which never quote it in an error.
    stripe_api_key: Annotated[str, Stated(pattern=STRIPE_API_KEY)] | None = Field(
        default=None,
        description="A Stripe secret or restricted key (`sk_…`, `rk_…`) to charge with; needs "
        "`charge_with` `stripe` (now or before). Write-only, stored sealed, never shown again. "
        "Left out or null: kept (`charge_with` `url` removes it).",
    )
    # Checked by the email settings (recoup.recovery.email_settings), which never quote the
    # password in an error.
    smtp_url: Annotated[str, Stated(pattern=SMTP_URL_PATTERN)] | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="The SMTP server customers' emails go through: "
        "`smtp://user:pass@host:port` (STARTTLS when offered; `?starttls=require` to insist) "
        "or `smtps://…` (TLS from the start). Write-only, stored sealed, never shown again "
        "(GET shows `smtp_configured`). Left out: kept (unlike the other fields); null: "
        "removed (no more emails).",
    )
    email_from: Annotated[str, Stated(pattern=ADDRESS_PATTERN)] | None = Field(
        default=None,
        min_length=3,
        max_length=320,
        description="The sender of customers' emails, e.g. \"Acme Billing "
        '<billing@acme.example>"; needed with an SMTP server.',
    )
    reply_to: Annotated[str, Stated(pattern=ADDRESS_PATTERN)] | None = Field(
        default=None, min_length=3, max_length=320, description="Where replies go."
    )
    update_card_url: Annotated[str, Stated(pattern=UPDATE_CARD_URL_PATTERN)] | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="The emails' link when the provider has no payment page: an https URL "
        "containing `{token}` (a signed token naming tenant, customer and invoice, which the "
        "app verifies with `recoup.receiver.verify_update_token`).",
    )
    email_templates: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="A directory on the server whose templates override the shipped ones.",
    )
    allow_unsubscribe: bool = Field(
        default=False,
        description="Reminders (retry_failed, card_expiring) carry `List-Unsubscribe`; the "
        "required notices never do.",
    )


class SettingsOut(BaseModel):
    policy: str | None
    event_url: str | None
    charge_url: str | None
    updated_at: datetime
    experiment_name: str | None = None
    experiment_policy: str | None = None
    experiment_share: float | None = None
    stripe_webhook_secret_set: bool = Field(
        default=False, description="Whether a Stripe endpoint secret is set (never the secret)."
    )
    default_timezone: str = "UTC"
    charge_with: Literal["url", "stripe"] = "url"
    stripe_api_key_set: bool = Field(
        default=False, description="Whether a Stripe API key is set (never the key)."
    )
    smtp_configured: bool = Field(
        default=False, description="Whether an SMTP server is set (never its URL)."
    )
    email_from: str | None = None
    reply_to: str | None = None
    update_card_url: str | None = None
    email_templates: str | None = None
    allow_unsubscribe: bool = False

    @classmethod
    def of(
        cls,
        settings: DunningSettings,
        intake: IntakeSettings | None = None,
        charge_with: Literal["url", "stripe"] = "url",
        emails: MessageSettings | None = None,
    ) -> SettingsOut:
        email_fields: dict[str, Any] = {}
        if emails is not None:
            email_fields = {
                "smtp_configured": emails.smtp_url is not None,
                "email_from": emails.email_from,
                "reply_to": emails.reply_to,
                "update_card_url": emails.update_card_url,
                "email_templates": emails.templates_dir,
                "allow_unsubscribe": emails.allow_unsubscribe,
            }
        return cls(
            policy=settings.policy_toml,
            event_url=settings.event_url,
            charge_url=settings.charge_url,
            updated_at=settings.updated_at,
            experiment_name=settings.experiment_name,
            experiment_policy=settings.experiment_policy_toml,
            experiment_share=settings.experiment_share,
            stripe_webhook_secret_set=bool(intake and intake.stripe_webhook_secret),
            default_timezone=intake.default_timezone if intake else DEFAULT_TIMEZONE,
            charge_with=charge_with,
            stripe_api_key_set=charge_with == "stripe",
            **email_fields,
        )
