"""A customer's access state in a Django app: `access_of(customer_id)` asks Recoup's API
(`GET /v1/dunning/customers/{id}`, through the Python client `recoup.client`) with the
settings every other part of the app reads from:

    RECOUP_API_URL = "https://recoup.internal"    # where Recoup's API is served
    RECOUP_API_TOKEN = env("RECOUP_API_TOKEN")     # the tenant's API token (`recoup tokens`)

    from recoup.contrib.django import access_of

    def dashboard(request):
        if access_of(request.user.customer_id) in ("restricted", "paused"):
            return redirect("billing:update-card")
        ...

One request per call: an app that gates every page on it keeps the value itself, updated
from the `customer.access_changed` events Recoup sends (`@idempotent_webhook`). A customer
Recoup does not know has nothing in dunning: `active`.
"""

from __future__ import annotations

from typing import Final

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

API_URL_SETTING: Final = "RECOUP_API_URL"
API_TOKEN_SETTING: Final = "RECOUP_API_TOKEN"
TIMEOUT_SETTING: Final = "RECOUP_API_TIMEOUT"  # seconds; default the client's


def access_of(customer_id: str) -> str:
    """The customer's access as Recoup holds it: `active`, `grace`, `restricted` or
    `paused`. Raises `ImproperlyConfigured` when a setting is missing, and the client's
    `ApiError`s when Recoup cannot answer (an app decides itself whether to fail open)."""
    from recoup.client import DEFAULT_TIMEOUT, Client, NotFoundError

    url, token = _setting(API_URL_SETTING), _setting(API_TOKEN_SETTING)
    timeout = float(getattr(settings, TIMEOUT_SETTING, None) or DEFAULT_TIMEOUT)
    with Client(url, token, timeout=timeout) as client:
        try:
            return str(client.get_customer(customer_id).access)
        except NotFoundError:
            return "active"


def _setting(name: str) -> str:
    value = getattr(settings, name, None)
    if not isinstance(value, str) or not value:
        raise ImproperlyConfigured(f"{name}: set it to read customers' access from Recoup")
    return value


__all__ = ["API_TOKEN_SETTING", "API_URL_SETTING", "access_of"]
