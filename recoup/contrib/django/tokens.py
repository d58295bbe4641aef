"""The update-card link's token in a Django app: `verify_update_token(token, customer_id=…)`
checks it against the secret in `settings.RECOUP_SIGNING_SECRET` (a list while rotating), the
setting every other part of the app reads, so the card page needs no login of its own.

    from recoup.contrib.django import verify_update_token
    from recoup.messages.tokens import InvalidUpdateToken

    def update_card(request):
        try:
            found = verify_update_token(request.GET["token"])
        except InvalidUpdateToken:
            return render(request, "billing/link_expired.html", status=403)
        customer = Customer.objects.get(recoup_id=found.customer_id)
        ...
"""

from __future__ import annotations

from datetime import datetime

from recoup.contrib.django.webhooks import DEFAULT_SECRET_SETTING, _secrets
from recoup.messages.tokens import UpdateToken
from recoup.messages.tokens import verify_update_token as _verify


def verify_update_token(
    token: str,
    *,
    customer_id: str | None = None,
    now: datetime | None = None,
    secret_setting: str = DEFAULT_SECRET_SETTING,
) -> UpdateToken:
    """The claims of `token`, verified with the secret(s) of `settings.<secret_setting>` (read
    on each call, so `override_settings` and a rotation apply at once); `InvalidUpdateToken`
    when it must not be honoured, `ImproperlyConfigured` when the setting is missing or bad."""
    return _verify(token, _secrets(secret_setting), now=now, customer_id=customer_id)


__all__ = ["verify_update_token"]
