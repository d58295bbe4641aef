"""Tenants' signing keys, cached for a minute of elapsed time so that HTTP attempts do not read
the tenant row each. The keys carry a rotation's overlap and its end, so a request sent after
the overlap ended is signed with the new secret alone, whatever the cache holds; a rotation
reaches the requests within `SECRET_TTL`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from recoup.jobs.model import Tenant
from recoup.jobs.signing import SigningKeys
from recoup.jobs.worker.clocks import Elapsed

log = logging.getLogger("recoup.worker")

SECRET_TTL = 60.0  # seconds a tenant's signing keys are cached


class SecretCache:
    """`await get(tenant)`: the tenant's signing keys (None when it has no row), read through
    `read_tenant` at most once per `SECRET_TTL`."""

    def __init__(
        self,
        read_tenant: Callable[[str], Awaitable[Tenant | None]],
        *,
        elapsed: Elapsed,
        worker_id: str,
    ) -> None:
        self._read_tenant = read_tenant
        self._elapsed = elapsed
        self._worker_id = worker_id
        self._keys: dict[str, tuple[SigningKeys | None, float]] = {}

    async def get(self, tenant: str) -> SigningKeys | None:
        cached = self._keys.get(tenant)
        now = self._elapsed.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        row = await self._read_tenant(tenant)
        if row is None or not row.signing_secret:
            log.warning("worker %s: tenant %r has no signing secret", self._worker_id, tenant)
            row = None
        self._keys[tenant] = (row, now + SECRET_TTL)
        return row


__all__ = ["SECRET_TTL", "SecretCache"]
