"""The worker's cache of tenants' signing keys: one read per tenant per `SECRET_TTL`, however
many attempts ask at once, and an attempt revoked while it waits does not stop the read."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from recoup.jobs.model import Tenant
from recoup.jobs.worker.clocks import Timer
from recoup.jobs.worker.secret_cache import SECRET_TTL, SecretCache
from tests.jobs.support import SECRET

ACME = Tenant(
    id="acme", name="Acme", signing_secret=SECRET, created_at=datetime(2026, 1, 1, tzinfo=UTC)
)


class SteppedElapsed:
    """Elapsed time that moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def call_later(self, seconds: float, callback: object) -> Timer:
        raise AssertionError("the cache arms no timer")


class Rows:
    """`read_tenant`, counting its reads, each held until `release` is set."""

    def __init__(self, *, fail: bool = False) -> None:
        self.reads = 0
        self.fail = fail
        self.release = asyncio.Event()

    async def __call__(self, tenant: str) -> Tenant | None:
        self.reads += 1
        await self.release.wait()
        if self.fail:
            raise OSError("the store is away")
        return ACME if tenant == "acme" else None


def cache(rows: Rows, elapsed: SteppedElapsed) -> SecretCache:
    return SecretCache(rows, elapsed=elapsed, worker_id="w")


def test_a_hundred_attempts_starting_together_read_the_tenant_once() -> None:
    async def go() -> None:
        rows, elapsed = Rows(), SteppedElapsed()
        keys = cache(rows, elapsed)
        waiting = [asyncio.create_task(keys.get("acme")) for _ in range(100)]
        await asyncio.sleep(0)
        rows.release.set()
        assert await asyncio.gather(*waiting) == [ACME] * 100
        assert rows.reads == 1
        assert await keys.get("acme") is ACME and rows.reads == 1  # cached
        elapsed.now += SECRET_TTL  # the entry is stale: read again
        assert await keys.get("acme") is ACME and rows.reads == 2

    asyncio.run(go())


def test_a_revoked_attempt_leaves_the_read_to_the_others() -> None:
    async def go() -> None:
        rows = Rows()
        keys = cache(rows, SteppedElapsed())
        first = asyncio.create_task(keys.get("acme"))  # the one that started the read
        second = asyncio.create_task(keys.get("acme"))
        await asyncio.sleep(0)
        first.cancel()
        rows.release.set()
        assert await second is ACME
        with pytest.raises(asyncio.CancelledError):
            await first
        assert rows.reads == 1

    asyncio.run(go())


def test_a_failed_read_fails_its_waiters_and_the_next_attempt_reads_again() -> None:
    async def go() -> None:
        rows = Rows(fail=True)
        keys = cache(rows, SteppedElapsed())
        waiting = [asyncio.create_task(keys.get("acme")) for _ in range(3)]
        await asyncio.sleep(0)
        rows.release.set()
        results = await asyncio.gather(*waiting, return_exceptions=True)
        assert [type(r) for r in results] == [OSError] * 3
        rows.fail = False
        assert await keys.get("acme") is ACME
        assert rows.reads == 2

    asyncio.run(go())


def test_a_tenant_without_a_row_signs_nothing_and_is_cached_too() -> None:
    async def go() -> None:
        rows = Rows()
        rows.release.set()
        keys = cache(rows, SteppedElapsed())
        assert await keys.get("gone") is None
        assert await keys.get("gone") is None
        assert rows.reads == 1

    asyncio.run(go())
