"""The intake store protocol: what failure intake from a payment provider (Stripe's webhooks,
`recoup.recovery.stripe_intake`) keeps per tenant: its intake settings (the webhook signing
secret, the zone of customers whose events name none) and every event it has processed, so
that a replayed delivery changes nothing and answers what the first one did. Implemented by
both backends (migration 0008_intake.sql).

An event is processed under a claim, as an idempotency key is (`recoup.idempotency`): the
first delivery inserts the event's row without an answer (`claim_event` → `Claimed`), acts,
and stores its answer (`finish_event`); a delivery that finds an answer replays it
(`Answered`); one that finds the claim of a delivery still at work is told to come back
(`Busy`), unless that claim is older than the lock timeout (its process died): then it takes
the claim over. A delivery that fails releases its claim (`release_event`), so the provider's
retry runs afresh.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from recoup.errors import InvalidInput
from recoup.sealed import is_sealed
from recoup.timekeeping.instants import require_aware
from recoup.timekeeping.zones import zone

DEFAULT_TIMEZONE = "UTC"
MAX_EVENT_ID = 255  # Stripe's ids are ~30 characters; this is the column's bound
# `whsec_` and the rest of a Stripe endpoint secret: printable ASCII, no spaces.
_STRIPE_SECRET = re.compile(r"whsec_[!-~]{8,250}")
HIDDEN = "whsec_…"  # what an error shows of a refused secret: never the value itself


def check_stripe_secret(secret: str, field: str = "stripe_webhook_secret") -> None:
    """`InvalidInput` naming `field` unless `secret` looks like a Stripe endpoint secret; the
    error never quotes the value (a typo'd secret is still most of a secret)."""
    if not _STRIPE_SECRET.fullmatch(secret):
        raise InvalidInput(
            field,
            HIDDEN,
            "expected the endpoint's signing secret as Stripe shows it: `whsec_` then 8–250 "
            "printable characters without spaces",
        )


@dataclass(frozen=True, kw_only=True)
class IntakeSettings:
    """A tenant's intake settings. `stripe_webhook_secret` (None: no Stripe intake) verifies
    the `Stripe-Signature` of its webhooks: as given, or as stored (sealed, `recoup.sealed`;
    the intake seals it before storing and opens it to verify); `default_timezone` is the zone
    of a customer whose event names none (`recoup.recovery.stripe_events`)."""

    tenant: str
    stripe_webhook_secret: str | None
    default_timezone: str
    updated_at: datetime

    def __post_init__(self) -> None:
        require_aware("updated_at", self.updated_at)
        if self.stripe_webhook_secret is not None and not is_sealed(self.stripe_webhook_secret):
            check_stripe_secret(self.stripe_webhook_secret)
        zone(self.default_timezone, field="default_timezone")

    def __repr__(self) -> str:  # never the secret, in a log line or a traceback
        secret = "set" if self.stripe_webhook_secret else "unset"
        return (
            f"IntakeSettings(tenant={self.tenant!r}, stripe_webhook_secret={secret}, "
            f"default_timezone={self.default_timezone!r})"
        )


@dataclass(frozen=True, kw_only=True)
class IntakeEvent:
    """A provider's event as the intake records it. `invoice_id` is the invoice it is about
    (a subscription's event: the subscription's id, so that a failure of its invoices arriving
    after its cancellation is known stale; None for a customer's event); `occurred_at` is when
    the provider created it (Stripe's `created`), which orders events that arrive out of
    order."""

    tenant: str
    provider: str  # "stripe"
    event_id: str
    type: str
    invoice_id: str | None
    occurred_at: datetime

    def __post_init__(self) -> None:
        require_aware("occurred_at", self.occurred_at)
        if not 1 <= len(self.event_id) <= MAX_EVENT_ID or "\x00" in self.event_id:
            raise InvalidInput("id", self.event_id, f"expected 1–{MAX_EVENT_ID} characters")


@dataclass(frozen=True)
class Claimed:
    """This delivery holds the event: act, then `finish_event` or `release_event`."""

    claimed_at: datetime


@dataclass(frozen=True)
class Answered:
    """The event was processed: `answer` is what its first delivery answered."""

    outcome: str
    answer: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Busy:
    """Another delivery of the event is at work; come back in `retry_after` seconds."""

    retry_after: int


Claim = Claimed | Answered | Busy


class IntakeStore(Protocol):
    def get_intake_settings(self, tenant: str) -> IntakeSettings | None: ...

    def put_intake_settings(self, settings: IntakeSettings) -> IntakeSettings:
        """Insert or replace the tenant's intake settings; return them as stored."""
        ...

    def claim_event(self, event: IntakeEvent, *, now: datetime, lock_timeout: timedelta) -> Claim:
        """Claim the event for this delivery (rules in the module docstring)."""
        ...

    def finish_event(
        self,
        event: IntakeEvent,
        *,
        claimed_at: datetime,
        outcome: str,
        answer: Mapping[str, Any],
        now: datetime,
    ) -> None:
        """Store the answer, if this delivery still holds the claim (one taken over is not
        overwritten)."""
        ...

    def release_event(self, event: IntakeEvent, *, claimed_at: datetime) -> None:
        """Drop the claim (nothing was done), if this delivery still holds it."""
        ...

    def invoice_event_since(
        self, tenant: str, provider: str, invoice_id: str, *, types: Sequence[str], since: datetime
    ) -> bool:
        """Whether an event of the invoice of one of `types` that occurred at or after
        `since` has been processed (a payment that makes an older failure stale)."""
        ...

    def prune_events(self, *, older_than: datetime, limit: int = 10_000) -> int:
        """Delete at most `limit` processed events that finished before `older_than`."""
        ...


__all__ = [
    "DEFAULT_TIMEZONE",
    "HIDDEN",
    "MAX_EVENT_ID",
    "Answered",
    "Busy",
    "Claim",
    "Claimed",
    "IntakeEvent",
    "IntakeSettings",
    "IntakeStore",
    "check_stripe_secret",
]
