"""A tenant's Stripe intake settings: the webhook endpoint's secret, sealed at rest by the
tenant's `Box` (opened only to verify a delivery), and the default zone of a failure whose
customer has none. Validated by `settled` before anything is written, as the other settings
of a tenant are (`hosted_settings`, `email_settings`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime

from recoup.recovery.intake_store import DEFAULT_TIMEZONE, IntakeSettings, IntakeStore
from recoup.recovery.records import KEEP, Keep
from recoup.sealed import Box, is_sealed


class StripeIntakeSettings:
    """The intake settings of every tenant, kept in `store`, the secret sealed by `box`."""

    def __init__(self, store: IntakeStore, box: Box, *, now: Callable[[], datetime]) -> None:
        self.store = store
        self.box = box
        self._now = now

    def settings(self, tenant: str) -> IntakeSettings:
        found = self.store.get_intake_settings(tenant)
        return found or IntakeSettings(
            tenant=tenant,
            stripe_webhook_secret=None,
            default_timezone=DEFAULT_TIMEZONE,
            updated_at=self._now(),
        )

    def webhook_secret(self, tenant: str) -> str | None:
        """The endpoint secret, opened (a secret stored before sealing existed is read as
        it is)."""
        found = self.store.get_intake_settings(tenant)
        if found is None or found.stripe_webhook_secret is None:
            return None
        return self.box.open(found.stripe_webhook_secret)

    def settled(
        self,
        tenant: str,
        *,
        stripe_webhook_secret: str | Keep | None = KEEP,
        default_timezone: str | Keep | None = KEEP,
    ) -> IntakeSettings:
        """The settings `configure` would store (validated, nothing written): each one given
        replaces the stored one (None: unset; the default zone back to UTC), each one left out
        stays."""
        current = self.settings(tenant)
        secret = current.stripe_webhook_secret
        if not isinstance(stripe_webhook_secret, Keep):
            secret = stripe_webhook_secret
        zone_name = current.default_timezone
        if not isinstance(default_timezone, Keep):
            zone_name = default_timezone or DEFAULT_TIMEZONE
        return IntakeSettings(
            tenant=tenant,
            stripe_webhook_secret=secret,
            default_timezone=zone_name,
            updated_at=self._now(),
        )

    def configure(
        self,
        tenant: str,
        *,
        stripe_webhook_secret: str | Keep | None = KEEP,
        default_timezone: str | Keep | None = KEEP,
    ) -> IntakeSettings:
        wanted = self.settled(
            tenant, stripe_webhook_secret=stripe_webhook_secret, default_timezone=default_timezone
        )
        return self.save(wanted)

    def save(self, settings: IntakeSettings) -> IntakeSettings:
        """Store settings made by `settled` (after whatever else had to validate first), the
        endpoint secret sealed."""
        secret = settings.stripe_webhook_secret
        if secret is not None and not is_sealed(secret):
            settings = replace(settings, stripe_webhook_secret=self.box.seal(secret))
        return self.store.put_intake_settings(settings)

    def reseal(self, tenants: Iterable[str]) -> int:
        """Seal the stored endpoint secrets of `tenants` again with the box's current key
        (after a new key is put first in `RECOUP_SECRET_KEY`, or for a secret stored before
        sealing); returns how many were sealed."""
        count = 0
        for tenant in tenants:
            found = self.store.get_intake_settings(tenant)
            if found is None or found.stripe_webhook_secret is None:
                continue
            self.store.put_intake_settings(
                replace(found, stripe_webhook_secret=self.box.reseal(found.stripe_webhook_secret))
            )
            count += 1
        return count


__all__ = ["StripeIntakeSettings"]
