"""The Django app: `INSTALLED_APPS = [..., "recoup.contrib.django"]`, label `recoup`."""

from __future__ import annotations

from django.apps import AppConfig


class RecoupConfig(AppConfig):
    name = "recoup.contrib.django"
    label = "recoup"  # "django" would clash with Django's own modules in app_label lookups
    verbose_name = "Recoup"

    def ready(self) -> None:
        from recoup.contrib.django import checks  # the checks import the models

        checks.register()


__all__ = ["RecoupConfig"]
