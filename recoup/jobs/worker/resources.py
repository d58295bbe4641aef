"""A worker session's resources: the thread pool that runs blocking store calls, and the HTTP
executor (opened on first use, so a session that sends nothing never builds a client)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Protocol, TypeVar

import aiohttp

from recoup.jobs.ssrf import SsrfGuard
from recoup.jobs.targets import HttpExecutor

T = TypeVar("T")


class StoreCall(Protocol):
    """`await call(fn, *args, **kwargs)`: `fn(*args, **kwargs)` in the store thread pool."""

    async def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


class Resources:
    """Opened by `open()` on the session's event loop and closed by `aclose()`: every store
    call of the worker goes through `call`, every HTTP attempt through `http()`."""

    def __init__(
        self,
        *,
        store_threads: int,
        ssrf: SsrfGuard,
        wall_clock: Callable[[], datetime],
        http_session: Callable[[], aiohttp.ClientSession] | None,
        max_connections: int,
    ) -> None:
        self._store_threads = store_threads
        self._ssrf = ssrf
        self._wall_clock = wall_clock
        self._http_session = http_session
        self._max_connections = max_connections
        self._executor: ThreadPoolExecutor | None = None
        self._http: HttpExecutor | None = None
        self._session: aiohttp.ClientSession | None = None  # made by `http_session`, closed here

    def open(self) -> None:
        self._executor = ThreadPoolExecutor(
            max_workers=self._store_threads, thread_name_prefix="recoup-store"
        )

    async def aclose(self) -> None:
        http, self._http = self._http, None
        session, self._session = self._session, None
        if http is not None:
            await http.aclose()
        if session is not None:
            await session.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run a blocking store call in the store thread pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def http(self) -> HttpExecutor:
        """The session's HTTP executor (one pooled client on this session's event loop), built
        on first use and closed with the session."""
        if self._http is None:
            if self._http_session is not None:
                self._session = self._http_session()
            self._http = HttpExecutor(
                guard=self._ssrf,
                wall_clock=self._wall_clock,
                session=self._session,
                max_connections=self._max_connections,
            )
        return self._http


__all__ = ["Resources", "StoreCall"]
