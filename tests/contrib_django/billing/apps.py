from __future__ import annotations

from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "tests.contrib_django.billing"
    label = "billing"
