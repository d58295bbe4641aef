"""The response model of an email preview (`GET /v1/dunning/emails/preview`): one customer
email of the tenant's, rendered with sample data (`recoup.recovery.email_preview`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class EmailPreviewOut(BaseModel):
    """As `recoup emails preview --json` prints it."""

    tenant: str = Field(description="The name the email shows for the tenant.")
    event: str = Field(description="The kind of email: payment_failed, retry_failed, …")
    locale: str
    timezone: str
    subject: str
    text: str = Field(description="The text part.")
    html: str = Field(description="The HTML part.")


__all__ = ["EmailPreviewOut"]
