"""Where a tenant's attempts are charged: at its own charge endpoint (`charge_with = "url"`,
the default: `charge_url`), or by Recoup itself through the tenant's Stripe account
(`"stripe"`, with a Stripe secret or restricted key, stored sealed: `recoup.sealed`).

A change is validated whole before anything is stored (`settled`, then `save`), and the key
is never returned, printed or put in an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from recoup.errors import InvalidInput
from recoup.recovery.hosted_store import HostedChargeStore, HostedCharging
from recoup.recovery.records import Keep
from recoup.sealed import Box

ChargeWith = Literal["url", "stripe"]
CHARGE_WITH: tuple[ChargeWith, ...] = ("url", "stripe")
HIDDEN = "(hidden)"  # what an error shows of a key
# Stripe's secret (sk_) and restricted (rk_) keys, test or live.
_STRIPE_KEY = re.compile(r"(sk|rk)_(test|live)_[0-9A-Za-z]{8,250}")


def check_stripe_api_key(key: str, field: str = "stripe_api_key") -> None:
    if not _STRIPE_KEY.fullmatch(key):
        raise InvalidInput(
            field,
            HIDDEN,
            "expected a Stripe secret or restricted key (sk_test_…, rk_live_…: letters and"
            " digits after the prefix)",
        )


@dataclass(frozen=True)
class HostedChange:
    """What `save` will do: store `charging`, or (None) charge at the endpoint again."""

    tenant: str
    charging: HostedCharging | None


class HostedSettings:
    def __init__(self, store: HostedChargeStore, box: Box, *, now: Callable[[], datetime]):
        self.store = store
        self.box = box
        self._now = now

    def charge_with(self, tenant: str) -> ChargeWith:
        return "stripe" if self.store.get_hosted_charging(tenant) is not None else "url"

    def settled(
        self, tenant: str, *, charge_with: ChargeWith | Keep, api_key: str | Keep
    ) -> HostedChange:
        """The change `save` makes (validated; the key sealed; nothing written). A key alone
        replaces the stored one and needs charging with Stripe, given now or before;
        `charge_with="url"` removes the key."""
        current = self.store.get_hosted_charging(tenant)
        wanted = current is not None if isinstance(charge_with, Keep) else charge_with == "stripe"
        if not isinstance(charge_with, Keep) and charge_with not in CHARGE_WITH:
            raise InvalidInput("charge_with", charge_with, f"expected one of {CHARGE_WITH}")
        if not wanted:
            if not isinstance(api_key, Keep):
                raise InvalidInput(
                    "stripe_api_key",
                    HIDDEN,
                    "expected with charge_with stripe (a key is kept"
                    " only to charge through Stripe)",
                )
            return HostedChange(tenant, None)
        if isinstance(api_key, Keep):
            if current is None:
                raise InvalidInput(
                    "stripe_api_key",
                    None,
                    "expected a Stripe API key to charge with Stripe (the tenant has none)",
                )
            return HostedChange(tenant, current)
        check_stripe_api_key(api_key)
        sealed = self.box.seal(api_key)
        return HostedChange(
            tenant,
            HostedCharging(
                tenant=tenant, provider="stripe", api_key=sealed, updated_at=self._now()
            ),
        )

    def save(self, change: HostedChange) -> HostedCharging | None:
        if change.charging is None:
            self.store.delete_hosted_charging(change.tenant)
            return None
        return self.store.put_hosted_charging(change.charging)

    def api_key(self, tenant: str) -> str | None:
        """The tenant's Stripe key, opened (for `recoup stripe check`)."""
        found = self.store.get_hosted_charging(tenant)
        return None if found is None else self.box.open(found.api_key)

    def reseal(self) -> int:
        """Seal every stored key again with the box's current key; returns how many."""
        count = 0
        for charging in self.store.list_hosted_charging():
            self.store.put_hosted_charging(
                HostedCharging(
                    tenant=charging.tenant,
                    provider=charging.provider,
                    api_key=self.box.reseal(charging.api_key),
                    updated_at=charging.updated_at,
                )
            )
            count += 1
        return count


__all__ = [
    "CHARGE_WITH",
    "ChargeWith",
    "HostedChange",
    "HostedSettings",
    "check_stripe_api_key",
]
