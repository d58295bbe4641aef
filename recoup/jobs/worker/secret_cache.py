"""Tenants' signing keys, cached for a minute of elapsed time so that HTTP attempts do not read
the tenant row each. The keys carry a rotation's overlap and its end, so a request sent after
the overlap ended is signed with the new secret alone, whatever the cache holds; a rotation
reaches the requests within `SECRET_TTL`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from recoup.jobs.model import Tenant
from recoup.jobs.signing import SigningKeys
from recoup.jobs.worker.clocks import Elapsed

log = logging.getLogger("recoup.worker")

SECRET_TTL = 60.0  # seconds a tenant's signing keys are cached


class SecretCache:
    """`await get(tenant)`: the tenant's signing keys (None when it has no row), read through
    `read_tenant` at most once per `SECRET_TTL`. Attempts that ask while a read is on its way
    wait for that read: a claimed batch of one tenant's jobs starting together (a hundred at
    once) reads its row once, not once per attempt."""

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
        self._reading: dict[str, asyncio.Task[SigningKeys | None]] = {}  # reads on their way

    async def get(self, tenant: str) -> SigningKeys | None:
        cached = self._keys.get(tenant)
        if cached is not None and cached[1] > self._elapsed.monotonic():
            return cached[0]
        reading = self._reading.get(tenant)
        if reading is None:
            # A task of its own, not the asking attempt's: an attempt revoked while it waits
            # (its await cancelled, through `shield`) leaves the read to the others.
            reading = asyncio.get_running_loop().create_task(self._read(tenant))
            self._reading[tenant] = reading
            reading.add_done_callback(lambda _: self._reading.pop(tenant, None))
            reading.add_done_callback(_retrieve)
        return await asyncio.shield(reading)

    async def _read(self, tenant: str) -> SigningKeys | None:
        row = await self._read_tenant(tenant)
        if row is None or not row.signing_secret:
            log.warning("worker %s: tenant %r has no signing secret", self._worker_id, tenant)
            row = None
        self._keys[tenant] = (row, self._elapsed.monotonic() + SECRET_TTL)
        return row


def _retrieve(task: asyncio.Task[SigningKeys | None]) -> None:
    # A failed read whose waiters were all revoked is not reported as never retrieved: the
    # next attempt reads again.
    if not task.cancelled():
        task.exception()


__all__ = ["SECRET_TTL", "SecretCache"]
