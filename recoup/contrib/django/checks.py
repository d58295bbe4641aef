"""System checks (`manage.py check`): the settings the app needs, reported at start-up rather
than on the first delivery."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from recoup.contrib.django.conf import (
    INVOICE_BOOK_SETTING,
    PROVIDER_SETTING,
    invoice_book,
    payment_provider,
)
from recoup.contrib.django.webhooks import DEFAULT_SECRET_SETTING
from recoup.errors import InvalidInput
from recoup.receiver.signatures import check_secrets


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    found: list[checks.CheckMessage] = []
    if not settings.USE_TZ:
        found.append(
            checks.Error(
                "USE_TZ is False: Recoup's records hold aware instants",
                hint="set USE_TZ = True (Django's default since 5.0)",
                id="recoup.E001",
            )
        )
    secret = getattr(settings, DEFAULT_SECRET_SETTING, None)
    if secret:
        try:
            check_secrets(secret)
        except InvalidInput as exc:
            found.append(checks.Error(f"{DEFAULT_SECRET_SETTING}: {exc.allowed}", id="recoup.E002"))
    for setting, load in (
        (PROVIDER_SETTING, payment_provider),
        (INVOICE_BOOK_SETTING, invoice_book),
    ):
        if getattr(settings, setting, None):
            try:
                load()
            except ImproperlyConfigured as exc:
                found.append(checks.Error(str(exc), id="recoup.E003"))
    return found


def register() -> None:
    checks.register(check_settings, "recoup")


__all__ = ["check_settings", "register"]
