"""Python handlers: functions registered by name in the worker's process (embedded use).

A handler receives a `HandlerContext` and may be sync or async. Returning normally means
success (a returned value other than None is kept, bounded, as the run's response excerpt);
raising `PermanentError` fails the job without retry; raising anything else is a retryable
failure, retried with the job's backoff until its attempts are spent.

Sync handlers run in a worker thread unless registered with `inline=True`, which declares them
cheap and non-blocking: they then run on the event loop itself, with no task or thread per
job (what a no-op or a counter wants).

The job's per-attempt `timeout` bounds a handler's attempt; running out of it is a retryable
failure ("timed out after N s"). An async handler is cancelled at the timeout. A sync handler
in a thread cannot be killed: the worker stops waiting for it and frees its slot, but the
thread runs on until the handler returns (holding one of the event loop's default-executor
threads meanwhile, and keeping the process from exiting), so a handler that may block should
bound its own waits too. An inline handler cannot be interrupted at all, and the timeout does
not apply to it: it blocks the whole worker while it runs, which is why inline is only for
handlers that take microseconds. (Recording an overrun after the fact would not stop it, and
retrying an attempt whose effects are done would only run them twice.)
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from recoup.errors import InvalidInput, RecoupError

if TYPE_CHECKING:
    from recoup.jobs.targets import HttpExecutor


class PermanentError(RecoupError):
    """Raised by a handler to fail its job at once, without retrying (any other exception is
    retried: the worker tells them apart by this class, not by `RecoupError`)."""


@dataclass(frozen=True, slots=True)
class HandlerContext:
    """What a handler knows about the attempt it is running."""

    job_id: str
    tenant: str
    name: str | None
    attempt: int  # 1 for the first attempt
    payload: Any
    idempotency_key: str | None
    run_at: datetime  # the instant the attempt was scheduled for
    # The worker session's HTTP client (built on first call, closed with the session), for a
    # handler that sends requests of its own: its connections are reused from one attempt to
    # the next. None where no worker runs the handler.
    http: Callable[[], HttpExecutor] | None = None


Handler = Callable[[HandlerContext], Any]
F = TypeVar("F", bound=Handler)


@dataclass(frozen=True, slots=True)
class RegisteredHandler:
    name: str
    fn: Handler
    is_async: bool
    inline: bool  # sync and declared cheap: run on the event loop without a task


class HandlerRegistry:
    """Handlers by name. `@registry.register("send-receipt")` or `registry.add(name, fn)`."""

    def __init__(self) -> None:
        self._handlers: dict[str, RegisteredHandler] = {}

    def add(self, name: str, fn: Handler, *, inline: bool = False) -> None:
        """Register `fn` as `name`; a name already taken → `InvalidInput`. `inline=True`
        (sync only) runs it on the event loop, outside the job's timeout (module docstring)."""
        if not name or len(name) > 200:
            raise InvalidInput("handler", name, "expected a name of 1–200 characters")
        if name in self._handlers:
            raise InvalidInput("handler", name, "a handler of that name is already registered")
        is_async = inspect.iscoroutinefunction(fn)
        if inline and is_async:
            raise InvalidInput("inline", name, "only sync handlers run inline")
        self._handlers[name] = RegisteredHandler(name, fn, is_async, inline)

    def register(self, name: str | None = None, *, inline: bool = False) -> Callable[[F], F]:
        """Decorator form of `add`; the function's own name when `name` is omitted."""

        def decorate(fn: F) -> F:
            self.add(name or fn.__name__, fn, inline=inline)
            return fn

        return decorate

    def get(self, name: str) -> RegisteredHandler | None:
        return self._handlers.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._handlers))

    def __len__(self) -> int:
        return len(self._handlers)


AsyncHandler = Callable[[HandlerContext], Awaitable[Any]]

__all__ = [
    "AsyncHandler",
    "Handler",
    "HandlerContext",
    "HandlerRegistry",
    "PermanentError",
    "RegisteredHandler",
]
