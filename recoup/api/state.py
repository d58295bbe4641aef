"""The app's typed state: what an operator tunes, and the services every route reads.

`create_app` builds one `ApiState` and sets it on `app.state.api`; the dependencies in
`recoup.api.deps` hand it to the route handlers, which are plain module-level functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from recoup.api.metrics import ApiMetrics
from recoup.api.rate_limits import RateLimit, TenantRateLimiter
from recoup.api.services import Services
from recoup.api.store_threads import StoreThreads
from recoup.api.token_cache import TokenCache
from recoup.idempotency import DEFAULT_LOCK_TIMEOUT, DEFAULT_RETENTION
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.time_travel import TestClock
from recoup.jobs.tracing import Tracing
from recoup.recovery.email_settings import EmailSettings
from recoup.recovery.hosted_settings import HostedSettings
from recoup.recovery.service import Dunning
from recoup.recovery.stripe_intake import StripeIntake
from recoup.timekeeping.clock import Clock

DEFAULT_MAX_BODY_BYTES = 256 * 1024  # a job's target body is a webhook payload, not a file
PRUNE_EVERY = timedelta(minutes=10)


@dataclass(frozen=True, kw_only=True)
class ApiSettings:
    """What an operator can tune. `ssrf` decides which targets jobs may call."""

    ssrf: SsrfGuard = field(default_factory=SsrfGuard)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    idempotency_retention: timedelta = DEFAULT_RETENTION
    idempotency_lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT
    prune_every: timedelta | None = PRUNE_EVERY  # None: the app never prunes keys itself
    rate_limit: RateLimit | None = None  # per tenant, per process; None: no limit
    # /metrics wants `Authorization: Bearer <it>`; None: /metrics answers loopback clients only.
    metrics_token: str | None = None


@dataclass(frozen=True, kw_only=True)
class ApiState:
    """Everything a route handler may use: the edge is where the clock is read."""

    settings: ApiSettings
    clock: Clock
    services: Services  # the scheduler and the API's own tables
    tokens: TokenCache  # the owners of the tokens seen, while the store's epoch holds
    dunning: Dunning
    intake: StripeIntake  # failure intake from Stripe's webhooks
    hosted: HostedSettings  # where a tenant's attempts are charged (its endpoint, or Stripe)
    metrics: ApiMetrics
    emails: EmailSettings  # customers' emails: the SMTP server (sealed), sender, link
    test_clock: TestClock | None  # only on a server on a virtual clock
    limiter: TenantRateLimiter | None = None  # settings.rate_limit's buckets
    tracing: Tracing | None = None  # spans of job creation (`recoup serve --otel`)
    threads: StoreThreads = field(default_factory=StoreThreads)  # the fast paths' store units

    @property
    def scheduler(self) -> Scheduler:
        return self.services.scheduler


__all__ = ["DEFAULT_MAX_BODY_BYTES", "PRUNE_EVERY", "ApiSettings", "ApiState"]
