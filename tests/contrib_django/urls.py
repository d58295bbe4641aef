from __future__ import annotations

from django.contrib import admin
from django.urls import path

from recoup.contrib.django import charge_view
from tests.contrib_django.billing.views import CLOCK, record_event

urlpatterns = [
    path("admin/", admin.site.urls),
    # The provider and the invoice book come from the settings, as a user would write it.
    path("recoup/charge", charge_view(clock=CLOCK)),
    path("hooks/event", record_event),
]
