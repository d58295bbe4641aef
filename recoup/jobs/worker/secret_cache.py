"""Tenants' signing secrets, cached for a minute of elapsed time so that HTTP attempts do not
read the tenant row each."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from recoup.jobs.model import Tenant
from recoup.jobs.worker.clocks import Elapsed

log = logging.getLogger("recoup.worker")

SECRET_TTL = 60.0  # seconds a tenant's signing secret is cached


class SecretCache:
    """`await get(tenant)`: the tenant's signing secret (None when it has none, or no row),
    read through `read_tenant` at most once per `SECRET_TTL`."""

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
        self._secrets: dict[str, tuple[str | None, float]] = {}

    async def get(self, tenant: str) -> str | None:
        cached = self._secrets.get(tenant)
        now = self._elapsed.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        row = await self._read_tenant(tenant)
        secret = row.signing_secret if row is not None else None
        if secret is None:
            log.warning("worker %s: tenant %r has no signing secret", self._worker_id, tenant)
        self._secrets[tenant] = (secret, now + SECRET_TTL)
        return secret


__all__ = ["SECRET_TTL", "SecretCache"]
